//! Finding the local server: the process listening on a loopback `--url`'s port. The listening
//! socket's inode comes from `/proc/net/tcp` and `/proc/net/tcp6` (state `0A`, LISTEN; proc(5)),
//! and the process is the one whose `/proc/<pid>/fd/*` links to `socket:[inode]`. The /proc root
//! is a seam, as for the sampler.

use std::net::IpAddr;
use std::path::Path;

/// What the search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listener {
    Found(u32),
    /// Nothing listens on the port in this network namespace.
    NotListening,
    /// A socket listens, but no process whose fds we may read holds it (another user's, or
    /// another container's).
    NotVisible,
}

/// The port of `url` if its host is on loopback (`127.0.0.0/8`, `::1`, `localhost`).
pub fn loopback_port(url: &str) -> Option<u16> {
    // Always `host:port` (the scheme's port when the URL has none), IPv6 in brackets.
    let authority = crate::options::url_authority(url)?;
    let (host, port) = authority.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    loopback.then_some(port)
}

/// The inodes of the sockets listening on `port` in one of `/proc/net/tcp{,6}`.
fn listening_inodes(table: &str, port: u16) -> Vec<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit_once(':')?.1;
            let listening = *f.get(3)? == "0A";
            (listening && u16::from_str_radix(local_port, 16).ok()? == port)
                .then(|| f.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// The process listening on `port` under `root` (normally `/proc`).
pub fn find(root: &Path, port: u16) -> Listener {
    let mut inodes = Vec::new();
    for table in ["net/tcp", "net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(root.join(table)) {
            inodes.extend(listening_inodes(&text, port));
        }
    }
    if inodes.is_empty() {
        return Listener::NotListening;
    }
    let wanted: Vec<String> = inodes.iter().map(|i| format!("socket:[{i}]")).collect();
    let Ok(entries) = std::fs::read_dir(root) else {
        return Listener::NotVisible;
    };
    let mut pids: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(root.join(pid.to_string()).join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path()) {
                if wanted.iter().any(|w| target.as_os_str() == w.as_str()) {
                    return Listener::Found(pid);
                }
            }
        }
    }
    Listener::NotVisible
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls_have_a_local_server_issue_15() {
        assert_eq!(loopback_port("ws://127.0.0.1:8765/v1/realtime"), Some(8765));
        assert_eq!(loopback_port("ws://localhost:9000/x"), Some(9000));
        assert_eq!(loopback_port("ws://[::1]:7000/x"), Some(7000));
        assert_eq!(loopback_port("wss://127.0.0.2/x"), Some(443));
        assert_eq!(loopback_port("ws://10.0.0.5:8765/x"), None);
        assert_eq!(loopback_port("ws://example.com:8765/x"), None);
    }

    #[test]
    fn the_listener_is_the_process_holding_the_listening_socket_on_a_fake_proc() {
        let root =
            std::env::temp_dir().join(format!("duplexbench-listener-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("net")).unwrap();
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        // Port 8765 = 0x223D: one connected socket (01) and the listening one (0A).
        std::fs::write(
            root.join("net/tcp"),
            format!("{header}   0: 0100007F:223D 0100007F:A000 01 00000000:00000000 00:00000000 00000000  1000        0 111 1\n   1: 0100007F:223D 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 222 1\n"),
        )
        .unwrap();
        std::fs::write(root.join("net/tcp6"), header).unwrap();
        assert_eq!(
            find(&root, 8765),
            Listener::NotVisible,
            "no process holds it yet"
        );
        for (pid, inode) in [(40, 111), (41, 222)] {
            let fd = root.join(format!("{pid}/fd"));
            std::fs::create_dir_all(&fd).unwrap();
            std::os::unix::fs::symlink(format!("socket:[{inode}]"), fd.join("3")).unwrap();
        }
        assert_eq!(find(&root, 8765), Listener::Found(41));
        assert_eq!(find(&root, 8766), Listener::NotListening);
        let _ = std::fs::remove_dir_all(&root);
    }
}
