//! Receivers for alert messages, real enough for lettre and hyper to talk to: an SMTP sink,
//! a chat webhook, and a server that accepts connections and never says a word.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// One e-mail as the SMTP sink received it.
#[derive(Debug, Clone)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    /// The DATA section: headers and body, as sent (line endings CRLF).
    pub data: String,
}

impl Mail {
    /// The body as a mail client shows it (quoted-printable decoded).
    pub fn text(&self) -> String {
        let body = self
            .data
            .split_once("\r\n\r\n")
            .map_or(self.data.as_str(), |(_, b)| b);
        if !self
            .data
            .contains("Content-Transfer-Encoding: quoted-printable")
        {
            return body.to_owned();
        }
        let joined = body.replace("=\r\n", "");
        let bytes = joined.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'=' && i + 2 < bytes.len() {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    }

    pub fn subject(&self) -> String {
        self.data
            .lines()
            .find_map(|l| l.strip_prefix("Subject: "))
            .unwrap_or_default()
            .to_owned()
    }
}

/// Messages collected by a receiver, and a way to wait for them.
#[derive(Clone)]
pub struct Inbox<T> {
    items: Arc<Mutex<Vec<T>>>,
    arrived: Arc<Notify>,
}

impl<T> Default for Inbox<T> {
    fn default() -> Self {
        Inbox {
            items: Arc::default(),
            arrived: Arc::default(),
        }
    }
}

impl<T: Clone> Inbox<T> {
    fn push(&self, item: T) {
        self.items.lock().unwrap().push(item);
        self.arrived.notify_waiters();
    }

    pub fn all(&self) -> Vec<T> {
        self.items.lock().unwrap().clone()
    }

    pub fn len(&self) -> usize {
        self.items.lock().unwrap().len()
    }

    /// Waits until at least `n` have arrived (at most ten seconds) and returns them all.
    pub async fn wait_for(&self, n: usize) -> Vec<T> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let notified = self.arrived.notified();
            if self.len() >= n {
                return self.all();
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("{} of {n} message(s) arrived in ten seconds", self.len());
            }
        }
    }
}

/// An SMTP server on 127.0.0.1 that accepts every message (no TLS, no AUTH: a local relay).
pub struct SmtpSink {
    pub port: u16,
    pub mails: Inbox<Mail>,
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mails = Inbox::default();
        let inbox = mails.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let inbox = inbox.clone();
                tokio::spawn(async move {
                    let _ = session(socket, inbox).await;
                });
            }
        });
        SmtpSink { port, mails }
    }

    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }
}

async fn session(socket: tokio::net::TcpStream, inbox: Inbox<Mail>) -> std::io::Result<()> {
    let (read, mut write) = socket.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(b"220 sink.test ESMTP ready\r\n").await?;
    let mut mail = Mail {
        from: String::new(),
        to: Vec::new(),
        data: String::new(),
    };
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let command = line.trim_end().to_owned();
        let verb = command
            .split(' ')
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" => b"250-sink.test\r\n250 8BITMIME\r\n",
            "HELO" | "RSET" | "NOOP" => b"250 OK\r\n",
            "MAIL" => {
                mail.from = address(&command);
                b"250 OK\r\n"
            }
            "RCPT" => {
                mail.to.push(address(&command));
                b"250 OK\r\n"
            }
            "DATA" => {
                write.write_all(b"354 end with <CRLF>.<CRLF>\r\n").await?;
                loop {
                    line.clear();
                    if lines.read_line(&mut line).await? == 0 {
                        return Ok(());
                    }
                    if line == ".\r\n" || line == ".\n" {
                        break;
                    }
                    mail.data.push_str(&line);
                }
                inbox.push(mail.clone());
                mail.to.clear();
                mail.data.clear();
                b"250 OK queued\r\n"
            }
            "QUIT" => {
                write.write_all(b"221 bye\r\n").await?;
                return Ok(());
            }
            _ => b"502 not implemented\r\n",
        };
        write.write_all(reply).await?;
    }
}

/// `a@b` from `MAIL FROM:<a@b> BODY=8BITMIME` or `RCPT TO:<a@b>`.
fn address(command: &str) -> String {
    command
        .split_once(':')
        .map(|(_, rest)| rest)
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .trim_matches(['<', '>'])
        .to_owned()
}

/// A chat's incoming webhook: takes JSON posts on `/hooks/secret-token`; answers 500 to
/// the first `fail_first` of them.
pub struct ChatHook {
    pub addr: std::net::SocketAddr,
    pub posts: Inbox<Value>,
}

#[derive(Clone)]
struct HookState {
    posts: Inbox<Value>,
    failures_left: Arc<Mutex<usize>>,
}

async fn take(State(state): State<HookState>, body: axum::Json<Value>) -> StatusCode {
    {
        let mut left = state.failures_left.lock().unwrap();
        if *left > 0 {
            *left -= 1;
            return StatusCode::INTERNAL_SERVER_ERROR;
        }
    }
    state.posts.push(body.0);
    StatusCode::OK
}

impl ChatHook {
    pub async fn start() -> ChatHook {
        ChatHook::failing_first(0).await
    }

    pub async fn failing_first(fail_first: usize) -> ChatHook {
        let posts = Inbox::default();
        let state = HookState {
            posts: posts.clone(),
            failures_left: Arc::new(Mutex::new(fail_first)),
        };
        let router = axum::Router::new()
            .route("/hooks/secret-token", axum::routing::post(take))
            .with_state(state);
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        ChatHook { addr, posts }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hooks/secret-token", self.addr)
    }

    /// The `text` of every post so far.
    pub fn texts(&self) -> Vec<String> {
        self.posts
            .all()
            .iter()
            .map(|p| p["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// Accepts connections and never answers: an SMTP server that hangs.
pub async fn black_hole() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    port
}
