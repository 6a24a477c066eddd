//! bench/http.py's fixed-rate load generator: an open loop that sends request k at
//! `start + k / rate`, to the microsecond, on whichever of its keep-alive connections is
//! free, and measures each latency from when the request was due, so a request that waited
//! for a connection or for the generator itself counts that wait (coordinated omission
//! corrected, as wrk2 and oha's `--latency-correction` do).
//!
//! Why not oha or wrk2: both schedule with millisecond timers (tokio's timer wheel, wrk2's
//! ae event loop), so at thousands of requests a second they send in bursts, or up to a
//! millisecond late, and against a server whose request costs 20 to 50 µs that lateness is
//! most of the latency they report (docs/speed.md, "Latency at a fixed rate"). This loop
//! never sleeps: it reads the clock, sends what is due and polls its sockets with a zero
//! timeout, so it keeps one core busy and sends each request within microseconds of its
//! time. The send lag (sent minus due) is reported beside the latency, so a run whose
//! generator fell behind shows it.
//!
//! `pace --port N --path P --body FILE --rate R --seconds S [--connections C]`: POST FILE's
//! bytes as application/json to 127.0.0.1:N at R requests a second for S seconds over C
//! connections (32), then wait up to 2 s for the answers in flight; print one JSON object.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

/// How long answers still in flight at the end are waited for before they count as errors.
const DRAIN: Duration = Duration::from_secs(2);

struct Options {
    port: u16,
    path: String,
    body: Vec<u8>,
    rate: f64,
    seconds: f64,
    connections: usize,
}

/// The command line, by hand as bench/echo's: six flags need no argument parser.
fn options() -> Result<Options, String> {
    let mut port = None;
    let mut path = String::from("/");
    let mut body = None;
    let mut rate = None;
    let mut seconds = None;
    let mut connections = 32;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or(format!("{flag} needs a value"));
        let number = |text: String| -> Result<f64, String> {
            text.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or(format!("{flag}: a positive number, not {text:?}"))
        };
        match flag.as_str() {
            "--port" => port = Some(value()?.parse().map_err(|e| format!("--port: {e}"))?),
            "--path" => path = value()?,
            "--body" => {
                let file = value()?;
                body = Some(std::fs::read(&file).map_err(|e| format!("--body {file}: {e}"))?);
            }
            "--rate" => rate = Some(number(value()?)?),
            "--seconds" => seconds = Some(number(value()?)?),
            "--connections" => {
                connections = value()?
                    .parse()
                    .ok()
                    .filter(|&n: &usize| n > 0)
                    .ok_or("--connections: a positive integer")?;
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(Options {
        port: port.ok_or("--port is required")?,
        path,
        body: body.ok_or("--body is required")?,
        rate: rate.ok_or("--rate is required")?,
        seconds: seconds.ok_or("--seconds is required")?,
        connections,
    })
}

/// One keep-alive connection and the request it has in flight, if any.
struct Conn {
    stream: TcpStream,
    /// When the request in flight was due; None when the connection is free.
    due: Option<Instant>,
    /// Bytes of the request written so far.
    written: usize,
    /// Bytes of the answer read so far.
    answer: Vec<u8>,
    /// The answer's whole length (head and body), once its head has been read.
    answer_len: Option<usize>,
    /// The answer's status code, once its head has been read.
    status: u16,
}

impl Conn {
    fn open(poll: &Poll, addr: SocketAddr, token: Token) -> std::io::Result<Conn> {
        // A blocking connect, then non-blocking use: every connection is up before the
        // schedule starts.
        let std_stream = std::net::TcpStream::connect(addr)?;
        std_stream.set_nodelay(true)?;
        std_stream.set_nonblocking(true)?;
        let mut stream = TcpStream::from_std(std_stream);
        poll.registry()
            .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
        Ok(Conn {
            stream,
            due: None,
            written: 0,
            answer: Vec::with_capacity(64 * 1024),
            answer_len: None,
            status: 0,
        })
    }

    /// Write what is left of the request; false when the connection failed.
    fn write(&mut self, request: &[u8]) -> bool {
        while self.written < request.len() {
            match self.stream.write(&request[self.written..]) {
                Ok(0) => return false,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        true
    }

    /// Read what has arrived: Ok(Some(status)) when the answer is whole, Ok(None) when more
    /// is to come, Err(why) when the connection failed or the answer cannot be read.
    fn read(&mut self) -> Result<Option<u16>, String> {
        let mut chunk = [0u8; 64 * 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("the server closed the connection".into()),
                Ok(n) => self.answer.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        if self.answer_len.is_none() {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut head = httparse::Response::new(&mut headers);
            let head_len = match head.parse(&self.answer).map_err(|e| e.to_string())? {
                httparse::Status::Complete(n) => n,
                httparse::Status::Partial => return Ok(None),
            };
            let length = head
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("content-length"))
                .and_then(|h| {
                    std::str::from_utf8(h.value)
                        .ok()?
                        .trim()
                        .parse::<usize>()
                        .ok()
                })
                .ok_or("an answer without a Content-Length (chunked answers are not read)")?;
            self.status = head.code.unwrap_or(0);
            self.answer_len = Some(head_len + length);
        }
        match self.answer_len {
            Some(len) if self.answer.len() >= len => {
                if self.answer.len() > len {
                    return Err("bytes after the answer on a connection with none asked".into());
                }
                self.answer.clear();
                self.answer_len = None;
                Ok(Some(self.status))
            }
            _ => Ok(None),
        }
    }
}

/// What one run counted.
struct Tally {
    latency: Histogram<u64>,
    /// Due to sent: the generator's lateness plus any wait for a free connection.
    lag: Histogram<u64>,
    /// Due to seen by the loop: the generator's own lateness alone.
    late: Histogram<u64>,
    /// Requests that fell due with every connection busy and waited for one.
    queued: u64,
    /// When the last answer came.
    last_answer: Option<Instant>,
    answered: u64,
    non_2xx: u64,
    failed: u64,
    last_failure: Option<String>,
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 100 s at three significant digits.
    Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid histogram bounds")
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

fn run(o: &Options) -> Result<serde_json::Value, String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], o.port));
    let mut request = format!(
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        o.path,
        o.port,
        o.body.len()
    )
    .into_bytes();
    request.extend_from_slice(&o.body);

    let mut pool = Pool::open(addr, o.connections)?;
    let mut waiting: VecDeque<Instant> = VecDeque::new();
    let mut events = Events::with_capacity(1024);
    let mut tally = Tally {
        latency: histogram(),
        lag: histogram(),
        late: histogram(),
        queued: 0,
        last_answer: None,
        answered: 0,
        non_2xx: 0,
        failed: 0,
        last_failure: None,
    };

    let total = (o.rate * o.seconds).round() as u64;
    let ns_per_request = 1e9 / o.rate;
    let start = Instant::now();
    let due_at = |k: u64| start + Duration::from_nanos((k as f64 * ns_per_request) as u64);
    let last_due = due_at(total.saturating_sub(1));
    let mut scheduled = 0u64;
    loop {
        let now = Instant::now();
        while scheduled < total && due_at(scheduled) <= now {
            let due = due_at(scheduled);
            tally.late.saturating_record(micros(now - due));
            if pool.free.len() <= waiting.len() {
                tally.queued += 1; // no connection free for it: it waits for one
            }
            waiting.push_back(due);
            scheduled += 1;
        }
        while !waiting.is_empty() {
            let Some(i) = pool.free.pop() else { break };
            let due = waiting.pop_front().expect("not empty");
            let c = &mut pool.conns[i];
            c.due = Some(due);
            c.written = 0;
            tally.lag.saturating_record(micros(Instant::now() - due));
            pool.in_flight += 1;
            if !c.write(&request) {
                pool.fail(&mut tally, i, "write failed".into())?;
            }
        }
        if scheduled == total && waiting.is_empty() && pool.in_flight == 0 {
            break;
        }
        if now > last_due + DRAIN {
            let missing = pool.in_flight + waiting.len();
            tally.failed += missing as u64;
            tally.last_failure = Some(format!(
                "{missing} answers not in {DRAIN:?} after the last was due"
            ));
            break;
        }
        pool.poll
            .poll(&mut events, Some(Duration::ZERO))
            .map_err(|e| format!("epoll: {e}"))?;
        for event in events.iter() {
            let i = event.token().0;
            let c = &mut pool.conns[i];
            let Some(due) = c.due else { continue };
            if event.is_writable() && !c.write(&request) {
                pool.fail(&mut tally, i, "write failed".into())?;
                continue;
            }
            if event.is_readable() || event.is_read_closed() {
                match c.read() {
                    Ok(None) => {}
                    Ok(Some(status)) => {
                        let now = Instant::now();
                        tally.latency.saturating_record(micros(now - due));
                        tally.last_answer = Some(now);
                        tally.answered += 1;
                        if !(200..300).contains(&status) {
                            tally.non_2xx += 1;
                        }
                        pool.done(i);
                    }
                    Err(why) => pool.fail(&mut tally, i, why)?,
                }
            }
        }
    }
    // The rate reached: answers over the time from the first due to the last answer (the
    // schedule's length when the server kept up, longer when it fell behind).
    let elapsed = (tally.last_answer.unwrap_or(last_due) - start)
        .as_secs_f64()
        .max(1e-9);
    let quantiles = |h: &Histogram<u64>| {
        serde_json::json!({
            "p50": h.value_at_quantile(0.50),
            "p90": h.value_at_quantile(0.90),
            "p99": h.value_at_quantile(0.99),
            "p999": h.value_at_quantile(0.999),
            "max": h.max(),
        })
    };
    Ok(serde_json::json!({
        "rate": o.rate,
        "seconds": elapsed,
        "connections": o.connections,
        "sent": total,
        "answered": tally.answered,
        "rps": tally.answered as f64 / elapsed,
        "non_2xx": tally.non_2xx,
        "failed": tally.failed,
        "last_failure": tally.last_failure,
        "latency_us": quantiles(&tally.latency),
        "send_lag_us": quantiles(&tally.lag),
        "late_us": quantiles(&tally.late),
        "queued": tally.queued,
    }))
}

/// The connections, which of them are free, and how many requests are in flight.
struct Pool {
    poll: Poll,
    addr: SocketAddr,
    conns: Vec<Conn>,
    /// Connections with no request on them, the next to use last.
    free: Vec<usize>,
    in_flight: usize,
}

impl Pool {
    fn open(addr: SocketAddr, connections: usize) -> Result<Pool, String> {
        let poll = Poll::new().map_err(|e| format!("epoll: {e}"))?;
        let conns = (0..connections)
            .map(|i| Conn::open(&poll, addr, Token(i)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("connect to {addr}: {e}"))?;
        Ok(Pool {
            poll,
            addr,
            conns,
            free: (0..connections).rev().collect(),
            in_flight: 0,
        })
    }

    /// Connection `i`'s request is answered: it is free again.
    fn done(&mut self, i: usize) {
        self.conns[i].due = None;
        self.in_flight -= 1;
        self.free.push(i);
    }

    /// Connection `i` failed with a request on it: counted, and replaced by a new one.
    fn fail(&mut self, tally: &mut Tally, i: usize, why: String) -> Result<(), String> {
        tally.failed += 1;
        tally.last_failure = Some(why);
        // The old stream's drop closes its socket, which takes it out of the epoll set.
        self.conns[i] = Conn::open(&self.poll, self.addr, Token(i))
            .map_err(|e| format!("reconnect to {}: {e}", self.addr))?;
        self.in_flight -= 1;
        self.free.push(i);
        Ok(())
    }
}

fn main() {
    let report = options().and_then(|o| run(&o));
    match report {
        Ok(report) => println!("{report}"),
        Err(why) => {
            eprintln!("pace: {why}");
            std::process::exit(2);
        }
    }
}
