//! Child processes of the suites: started with a command line, talked to by lines on
//! stdout (`ready`, `start`, `done …`, results), stopped by closing stdin, then SIGTERM,
//! then SIGKILL. A child is always stopped when dropped, and killed when the run is
//! interrupted ([`crate::interrupt`]); once it is, no new child starts.
//!
//! The child's side of the protocol: [`say`] a line, watch [`stdin_closed`].

use crate::interrupt::{self, Tracked};
use crate::PeerError;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A running child process.
pub struct Child {
    child: std::process::Child,
    lines: Receiver<String>,
    what: &'static str,
    /// Declared last: the process stays tracked until `drop` has reaped it.
    _tracked: Tracked,
}

impl Child {
    /// Starts `exe args…` with extra environment; `what` names it in errors. Refused once
    /// the run is interrupted.
    pub fn spawn(
        exe: &Path,
        args: &[String],
        env: &[(&str, String)],
        what: &'static str,
    ) -> Result<Child, PeerError> {
        if interrupt::interrupted() {
            return Err(PeerError::setup(what, interrupt::Refused));
        }
        let mut cmd = Command::new(exe);
        cmd.args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| PeerError::setup(what, format!("cannot start {}: {e}", exe.display())))?;
        let tracked = match interrupt::track(child.id(), false) {
            Ok(t) => t,
            Err(refused) => {
                // interrupted while it started
                let _ = child.kill();
                let _ = child.wait();
                return Err(PeerError::setup(what, refused));
            }
        };
        let out = child
            .stdout
            .take()
            .ok_or_else(|| PeerError::setup(what, "no stdout"))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Child {
            child,
            lines: rx,
            what,
            _tracked: tracked,
        })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `timeout` for a line starting with `prefix`; returns the whole line.
    /// Other lines are skipped. On timeout or exit the error carries the child's stderr.
    pub fn expect(&mut self, prefix: &str, timeout: Duration) -> Result<String, PeerError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return Ok(l),
                Ok(_) => {}
                Err(e) => {
                    let why = match e {
                        RecvTimeoutError::Timeout => format!("no {prefix:?} within {timeout:?}"),
                        RecvTimeoutError::Disconnected => format!("exited before {prefix:?}"),
                    };
                    let tail = self.stop_and_tail();
                    return Err(PeerError::call(self.what, format!("{why}: {tail}")));
                }
            }
        }
    }

    /// Waits up to `timeout` for a line starting with `prefix`, leaving the child running
    /// if none comes.
    pub fn try_expect(&mut self, prefix: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return Some(l),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
    }

    /// Writes `line` and a newline to the child's stdin (a command); false once stdin is
    /// closed or the child is gone.
    pub fn send(&mut self, line: &str) -> bool {
        match self.child.stdin.as_mut() {
            Some(stdin) => writeln!(stdin, "{line}")
                .and_then(|_| stdin.flush())
                .is_ok(),
            None => false,
        }
    }

    /// Drops every line the child has printed and nobody read yet.
    pub fn discard_lines(&mut self) {
        while self.lines.try_recv().is_ok() {}
    }

    /// Closes the child's stdin (the suites' "stop" signal).
    pub fn close_stdin(&mut self) {
        drop(self.child.stdin.take());
    }

    /// Waits up to `timeout` for the child to exit by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    /// Stops the child: closes stdin, waits briefly, then [`Child::terminate`].
    pub fn stop(&mut self) {
        self.close_stdin();
        if !self.wait_exit(Duration::from_millis(500)) {
            self.terminate();
        }
    }

    /// Stops the child with SIGTERM, then SIGKILL if it is still there after 2 s.
    pub fn terminate(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        if self.wait_exit(Duration::from_secs(2)) {
            return;
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` to the child (SIGSTOP and SIGCONT to stall it, for instance).
    pub fn signal(&self, signal: i32) {
        // SAFETY: signalling our own child process; a signal number the kernel does not
        // know is refused with EINVAL, nothing else happens.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// Kills the child at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Stops the child and returns the last lines of its stderr, joined by ` | `.
    pub fn stop_and_tail(&mut self) -> String {
        let stderr = self.stop_and_read_stderr();
        let lines: Vec<&str> = stderr.lines().collect();
        lines[lines.len().saturating_sub(6)..].join(" | ")
    }

    fn stop_and_read_stderr(&mut self) -> String {
        self.stop();
        let mut s = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Prints `line` to stdout and flushes it: how a child talks to the suite.
pub fn say(line: &str) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

/// A flag set when stdin closes (the suite's way to say "stop").
pub fn stdin_closed() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        for _ in stdin.lock().lines().map_while(Result::ok) {}
        // SYNC: a plain flag; nothing else is published through it.
        f.store(true, Ordering::Relaxed);
    });
    flag
}
