-- How each operator reads the dashboard.
-- `language`: 'en' or 'de-CH'; NULL follows the browser's Accept-Language.
ALTER TABLE operators ADD COLUMN language TEXT;
-- An IANA time zone name (e.g. 'Europe/Zurich') the dashboard shows times in; NULL is the
-- default, Europe/Zurich.
ALTER TABLE operators ADD COLUMN time_zone TEXT;
