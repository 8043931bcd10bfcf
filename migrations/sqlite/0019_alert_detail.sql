-- What an alert is about, as data (its kind and figures, JSON): each reader's page writes it
-- in their own language, where `summary` holds it in the words of the instance that checked.
-- NULL for alerts opened before this column existed; their summary stands.
ALTER TABLE alerts ADD COLUMN detail TEXT;
