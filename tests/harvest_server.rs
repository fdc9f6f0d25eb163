//! The harvest server ([`fanout::run::harvest_server`]), started as `fanout run`
//! starts it: from a process with one thread, which a test harness is not (this file
//! has none: `main` runs each check in turn, on the main thread).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fanout::run::harvest_process::Request;
use fanout::run::harvest_server::{HarvestServer, Harvester};

fn request(common: &Path) -> Request {
    Request {
        common: common.to_owned(),
        name: "w1".into(),
        path: common.join("nowhere"),
        scratch: common.to_owned(),
        branch: "fanout/x/w1".into(),
        base: "1".repeat(40),
        identity: ("fanout".into(), "fanout@example.invalid".into()),
        message: "m".into(),
        exclude: Vec::new(),
        filters: Vec::new(),
    }
}

/// This process's children, of every thread (exited and not reaped included).
fn children() -> Vec<u32> {
    let tasks = std::fs::read_dir("/proc/self/task").unwrap();
    let mut pids = Vec::new();
    for task in tasks {
        let children = std::fs::read_to_string(task.unwrap().path().join("children"));
        pids.extend(
            children
                .unwrap_or_default()
                .split_whitespace()
                .map(|p| p.parse::<u32>().unwrap()),
        );
    }
    pids
}

/// The server's pid: the one child of this process.
fn server_pid() -> u32 {
    let pids = children();
    assert_eq!(pids.len(), 1, "children: {pids:?}");
    pids[0]
}

fn status_field(pid: u32, field: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field).map(|v| v.trim().to_owned()))
        .unwrap_or_default()
}

/// Harvests asked for at once each get their own answer, each through a child of the
/// server's, and the child's failure reads as it would from an exec'd one.
fn answers_each_harvest_through_a_child_of_its_own(server: &HarvestServer) {
    let dirs: Vec<tempfile::TempDir> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    std::thread::scope(|s| {
        let asked: Vec<_> = dirs
            .iter()
            .map(|d| s.spawn(|| (d.path().to_owned(), server.harvest(&request(d.path())))))
            .collect();
        for a in asked {
            let (dir, got) = a.join().unwrap();
            // No repository there: the harvest fails in the child, and says where.
            let err = got.unwrap_err();
            assert!(
                err.contains(&dir.display().to_string()) && err.contains("repository"),
                "{err}"
            );
        }
    });
}

/// Wait until `done`, for at most `limit` (not a timing: the checks after it say
/// what had to happen).
fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL to process `pid`.
fn kill(pid: u32) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).unwrap();
}

/// The children of `pid`, oldest first.
fn children_of(pid: u32) -> Vec<u32> {
    let list = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"));
    let mut pids: Vec<(u64, u32)> = list
        .unwrap_or_default()
        .split_whitespace()
        .map(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            let fields: Vec<&str> = stat
                .rsplit_once(") ")
                .unwrap_or_default()
                .1
                .split(' ')
                .collect();
            (
                fields.get(19).and_then(|t| t.parse().ok()).unwrap_or(0),
                p.parse().unwrap(),
            )
        })
        .collect();
    pids.sort_unstable();
    pids.into_iter().map(|(_, p)| p).collect()
}

/// A child killed before it read its request: the run hears so at once (by which
/// signal, or that the other end is gone, when the server said so before the
/// request went: then the run harvests otherwise), for no other child of the
/// server's (the spare forked meanwhile) holds its socket open. With the spare
/// killed as well, none is forked ahead again, and the next harvest is still
/// answered (its child forked when it comes).
fn a_killed_child_is_told(server: &HarvestServer) {
    let pid = server_pid();
    let asked = server.ask().unwrap();
    // Handed to the spare (it waits for the request), and the next spare forked.
    wait_until(Duration::from_secs(10), || children_of(pid).len() >= 2);
    let children = children_of(pid);
    assert_eq!(children.len(), 2, "the harvesting child and a spare");
    kill(children[0]);
    let dir = tempfile::tempdir().unwrap();
    let sent = request(dir.path());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(asked.answer(&sent)));
    let answer = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("an answer before the spare ends: it holds no copy of the socket");
    if let Some(got) = answer {
        assert_eq!(
            got.unwrap_err(),
            "the harvest process was killed by signal 9"
        );
    }
    // The spare killed too: the next harvest's child is forked when it comes.
    wait_until(Duration::from_secs(10), || children_of(pid).len() == 1);
    let spare = children_of(pid);
    assert_eq!(spare.len(), 1, "the spare alone: {spare:?}");
    kill(spare[0]);
    // Reaped, and no spare forked again after one ended unused.
    wait_until(Duration::from_secs(10), || children_of(pid).is_empty());
    assert_eq!(children_of(pid), Vec::<u32>::new());
    let err = server.harvest(&request(dir.path())).unwrap_err();
    assert!(err.contains("repository"), "{err}");
}

/// The server leads a session of its own, deaf to stop signals.
fn is_detached(server: u32) {
    let sid = std::fs::read_to_string(format!("/proc/{server}/stat")).unwrap();
    let fields: Vec<&str> = sid.rsplit_once(") ").unwrap().1.split(' ').collect();
    assert_eq!(fields[3], server.to_string(), "session id: {sid}");
    let ignored = u64::from_str_radix(&status_field(server, "SigIgn:"), 16).unwrap();
    for sig in [nix::libc::SIGINT, nix::libc::SIGTERM, nix::libc::SIGHUP] {
        assert_ne!(ignored & (1u64 << (sig - 1)), 0, "signal {sig} ignored");
    }
}

/// Closing waits for a harvest in progress: asked for before, answered after, it
/// still gets its child's answer. The server outlives its children (whose answers
/// are taken before they end), so none is re-parented to this
/// process (a child subreaper, as a run is). Once closed, the server is gone
/// (reaped), and a harvest asked for then fails plainly.
fn closes(server: &HarvestServer, pid: u32) {
    let dir = tempfile::tempdir().unwrap();
    let asked = server.ask().unwrap();
    std::thread::scope(|s| {
        let closing = s.spawn(|| server.close());
        // Not a timing: a server that did not wait would be gone well before, and
        // its harvest with it.
        wait_until(Duration::from_millis(300), || closing.is_finished());
        let err = asked.answer(&request(dir.path())).expect("an answer");
        assert!(err.unwrap_err().contains("repository"));
    });
    assert_eq!(children(), Vec::<u32>::new(), "left behind");
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "still there");
    let err = server.harvest(&request(dir.path())).unwrap_err();
    assert!(err.starts_with("the harvest server:"), "{err}");
    server.close();
}

/// Told that no more harvests will come, the server ends on its own, before it is
/// closed; a harvest asked for after all is run by executing the binary instead.
fn ends_once_no_more_harvests_come() {
    let server = Arc::new(HarvestServer::start(|| ()).expect("one thread here"));
    let pid = server_pid();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_fanout"));
    let harvester = Harvester::Server(Arc::clone(&server), exe);
    harvester.done_asking();
    let state = || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        stat.rsplit_once(") ").unwrap().1.chars().next().unwrap()
    };
    wait_until(Duration::from_secs(10), || state() == 'Z');
    assert_eq!(state(), 'Z', "ended, not reaped yet");
    let dir = tempfile::tempdir().unwrap();
    let err = harvester.harvest(&request(dir.path())).unwrap_err();
    assert!(err.contains("repository"), "{err}");
    server.close();
    assert_eq!(children(), Vec::<u32>::new(), "left behind");
}

/// A server that does not end on its own (a harvest never answered) is killed, and
/// its child goes with it.
fn a_server_that_does_not_end_is_killed() {
    let server = HarvestServer::start(|| ()).expect("one thread here");
    let pid = server_pid();
    let asked = server.ask().unwrap();
    server.close();
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "still there");
    drop(asked);
    // Killed with the server, they were re-parented here.
    while nix::sys::wait::waitpid(None, None).is_ok() {}
    assert_eq!(children(), Vec::<u32>::new(), "left behind");
}

/// With the server gone, the run's harvests execute fanout's binary instead.
fn a_gone_server_is_stood_in_for(server: Arc<HarvestServer>) {
    let harvester = Harvester::Server(server, PathBuf::from(env!("CARGO_BIN_EXE_fanout")));
    let dir = tempfile::tempdir().unwrap();
    let err = harvester.harvest(&request(dir.path())).unwrap_err();
    assert!(
        err.contains(&dir.path().display().to_string()) && err.contains("repository"),
        "{err}"
    );
}

fn main() {
    nix::sys::prctl::set_child_subreaper(true).unwrap();
    // What the server must forget runs in it (and only there) first thing.
    let dir = tempfile::tempdir().unwrap();
    let forgot = dir.path().join("forgot");
    let server = HarvestServer::start(|| {
        std::fs::write(&forgot, std::process::id().to_string()).unwrap();
    })
    .expect("one thread here: the server starts");
    let pid = server_pid();
    wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(&forgot).is_ok_and(|s| !s.is_empty())
    });
    assert_eq!(std::fs::read_to_string(&forgot).unwrap(), pid.to_string());
    answers_each_harvest_through_a_child_of_its_own(&server);
    is_detached(pid);
    a_killed_child_is_told(&server);
    // With a second thread, no server is forked.
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        s.spawn(move || rx.recv());
        assert!(HarvestServer::start(|| ()).is_none());
        drop(tx);
    });
    closes(&server, pid);
    a_gone_server_is_stood_in_for(Arc::new(server));
    ends_once_no_more_harvests_come();
    a_server_that_does_not_end_is_killed();
    println!("harvest_server: 9 checks passed");
}
