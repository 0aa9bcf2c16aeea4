//! When the server's bytes reached the client's socket, from the kernel, not from the clock
//! read after the read returned.
//!
//! A session times a reply when it reads it (docs/metrics.md, "Arrival"). A worker busy with
//! other sessions' sends read late, and the wait was counted as the server's: at 1 × 1024 with
//! one start gate the replies to the first sends arrived while 1,024 packets were being sent and
//! were timed a wave later. With `SO_TIMESTAMPNS` the kernel stamps each segment as it comes in
//! and a TCP `recvmsg` returns the stamp of the last segment it read, so a reply read late is
//! still timed when it came. The kernel's stamp is `CLOCK_REALTIME`; it is put on the
//! `CLOCK_MONOTONIC` scale of every other figure by the two clocks' offset read at the read.

use crate::clock::{monotonic_s, realtime_ns};
use socket2::{MaybeUninitSlice, MsgHdrMut, SockRef};
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

/// A stamp further in the past than this is not believed (a clock stepped between the stamp and
/// the read): the read's own time stands instead.
const OLDEST_BELIEVED_S: f64 = 60.0;
/// Room for one `SCM_TIMESTAMPNS` control message (a `cmsghdr` and a `timespec`) and then some.
const CONTROL_BYTES: usize = 64;

/// A TCP stream whose reads remember when their bytes arrived.
pub struct TimedTcp {
    stream: TcpStream,
    /// The kernel stamps received segments (the option could be set).
    stamped: bool,
    /// When the bytes of the last read that returned any arrived, on the monotonic scale;
    /// `None` before the first read and when the kernel gave no stamp.
    arrival_s: Option<f64>,
}

impl TimedTcp {
    /// Asks the kernel to stamp what `stream` receives; where it refuses, reads are timed by
    /// the clock as before ([`TimedTcp::arrival_s`] is `None`).
    pub fn new(stream: TcpStream) -> TimedTcp {
        let stamped = nix::sys::socket::setsockopt(
            &stream,
            nix::sys::socket::sockopt::ReceiveTimestampns,
            &true,
        )
        .is_ok();
        TimedTcp {
            stream,
            stamped,
            arrival_s: None,
        }
    }

    /// When the bytes of the last read arrived at the socket (the last segment's stamp), on the
    /// [`monotonic_s`] scale.
    pub fn arrival_s(&self) -> Option<f64> {
        self.arrival_s
    }

    pub fn get_ref(&self) -> &TcpStream {
        &self.stream
    }

    /// One `recvmsg` into `unfilled`: the bytes read and the kernel's stamp (realtime
    /// nanoseconds), if it gave one.
    fn recv_stamped(&self, unfilled: &mut [MaybeUninit<u8>]) -> io::Result<(usize, Option<i64>)> {
        let mut control = [MaybeUninit::<u8>::new(0); CONTROL_BYTES];
        let mut bufs = [MaybeUninitSlice::new(unfilled)];
        let mut msg = MsgHdrMut::new()
            .with_buffers(&mut bufs)
            .with_control(&mut control);
        let n = SockRef::from(&self.stream).recvmsg(&mut msg, 0)?;
        let control_len = msg.control_len().min(CONTROL_BYTES);
        // SAFETY: every byte of `control` was initialised (to 0) when it was made, and the
        // kernel only writes bytes into it.
        let control: &[u8] =
            unsafe { std::slice::from_raw_parts(control.as_ptr().cast::<u8>(), control_len) };
        Ok((n, realtime_stamp(control)))
    }

    /// A read that returned less than it had room for emptied the socket: the stream is marked
    /// not readable, as tokio's own `poll_read` does after such a read, so that the next read
    /// waits for epoll instead of making a `recvmsg` only to hear `EAGAIN` (one system call a
    /// packet, issue 17). Bytes that came after the read raise a new edge, and with it a new
    /// readiness. This clears the readiness the stream has now, not the one the read began
    /// with (tokio keeps that to itself), which is the same on the worker's single-threaded
    /// runtime: its reactor runs only between tasks, never inside this read.
    fn drained(&self) {
        let _ = self.stream.try_io(Interest::READABLE, || {
            Err::<(), _>(io::ErrorKind::WouldBlock.into())
        });
    }
}

/// The `SCM_TIMESTAMPNS` stamp among the control messages `control` holds, in realtime
/// nanoseconds.
fn realtime_stamp(control: &[u8]) -> Option<i64> {
    let header = std::mem::size_of::<libc::cmsghdr>();
    let word = std::mem::size_of::<usize>();
    let align = |n: usize| n.div_ceil(word) * word;
    let mut at = 0;
    while at + header <= control.len() {
        let field = |offset: usize, len: usize| control.get(at + offset..at + offset + len);
        let len = usize::from_ne_bytes(field(0, word)?.try_into().ok()?);
        let level = i32::from_ne_bytes(field(word, 4)?.try_into().ok()?);
        let kind = i32::from_ne_bytes(field(word + 4, 4)?.try_into().ok()?);
        if len < header {
            return None;
        }
        if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS {
            let data = align(header);
            let secs = i64::from_ne_bytes(field(data, 8)?.try_into().ok()?);
            let nanos = i64::from_ne_bytes(field(data + 8, 8)?.try_into().ok()?);
            return secs.checked_mul(1_000_000_000)?.checked_add(nanos);
        }
        at += align(len);
    }
    None
}

/// `stamp_ns` (realtime) on the monotonic scale, given both clocks read now; `None` for a stamp
/// that cannot be right (in the future, or long ago: the realtime clock was stepped). How long
/// ago is taken in whole nanoseconds: in `f64` seconds, both realtime readings would be rounded
/// to a quarter microsecond, and back-to-back segments' times could swap.
fn to_monotonic(stamp_ns: i64, realtime_now_ns: i64, monotonic_now_s: f64) -> Option<f64> {
    let ago_s = realtime_now_ns.checked_sub(stamp_ns)? as f64 * 1e-9;
    (0.0..OLDEST_BELIEVED_S)
        .contains(&ago_s)
        .then_some(monotonic_now_s - ago_s)
}

impl AsyncRead for TimedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.stamped {
            return Pin::new(&mut this.stream).poll_read(cx, buf);
        }
        loop {
            ready!(this.stream.poll_read_ready(cx))?;
            // SAFETY: `recvmsg` only writes into the slice, and only the `n` bytes it reports
            // are marked filled below.
            let unfilled = unsafe { buf.unfilled_mut() };
            let room = unfilled.len();
            match this
                .stream
                .try_io(Interest::READABLE, || this.recv_stamped(unfilled))
            {
                Ok((n, stamp)) => {
                    // SAFETY: the kernel wrote the first `n` bytes of the unfilled part.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    if n > 0 {
                        if n < room {
                            this.drained();
                        }
                        this.arrival_s = stamp.and_then(|stamp_ns| {
                            let monotonic_now_s = monotonic_s();
                            to_monotonic(stamp_ns, realtime_ns(), monotonic_now_s)
                        });
                    }
                    return Poll::Ready(Ok(()));
                }
                // `try_io` cleared the readiness: wait for the next.
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => continue,
                Err(err) => return Poll::Ready(Err(err)),
            }
        }
    }
}

impl AsyncWrite for TimedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A stamped client socket and the server's end of its connection, on loopback.
    async fn pair() -> (TimedTcp, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (TimedTcp::new(client), server)
    }

    /// Returns once the kernel stamps received segments. It turns stamping on for the whole
    /// host from a work queue when the first socket asks (or asks again after the last one
    /// closed): segments received before that come without a stamp, and such a read is timed
    /// by the clock instead. A test that needs a stamp calls this after its own socket asked
    /// (which keeps stamping on) and before the segment it times is sent.
    pub(crate) async fn until_the_kernel_stamps() {
        let (mut client, mut server) = pair().await;
        let mut buf = [0u8; 4];
        for _ in 0..200 {
            server.write_all(b"warm").await.unwrap();
            client.read_exact(&mut buf).await.unwrap();
            if client.arrival_s().is_some() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("the kernel stamped nothing in 2 s");
    }

    #[test]
    fn bytes_read_late_are_timed_when_they_arrived() {
        runtime().block_on(async {
            let (mut client, mut server) = pair().await;
            assert!(client.stamped, "loopback TCP takes SO_TIMESTAMPNS");
            assert_eq!(client.arrival_s(), None, "nothing read yet");
            until_the_kernel_stamps().await;
            for _ in 0..2 {
                let sent_s = monotonic_s();
                server.write_all(b"reply").await.unwrap();
                // The client reads 150 ms after the bytes came.
                tokio::time::sleep(std::time::Duration::from_millis(150)).await;
                let mut buf = [0u8; 16];
                let n = client.read(&mut buf).await.unwrap();
                let read_s = monotonic_s();
                assert_eq!(&buf[..n], b"reply");
                let arrival_s = client.arrival_s().expect("the kernel stamped the bytes");
                assert!(arrival_s >= sent_s - 0.001, "{arrival_s} before {sent_s}");
                assert!(
                    read_s - arrival_s >= 0.14,
                    "arrival {arrival_s} is the read's time {read_s}, not the bytes'"
                );
            }
            // Writes go through untouched; the end reads as 0 bytes.
            client.write_all(b"append").await.unwrap();
            let mut buf = [0u8; 6];
            server.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"append");
            drop(server);
            let mut buf = [0u8; 16];
            assert_eq!(client.read(&mut buf).await.unwrap(), 0);
        });
    }

    #[test]
    fn a_read_that_empties_the_socket_leaves_it_unreadable_until_more_bytes_come() {
        runtime().block_on(async {
            let (mut client, mut server) = pair().await;
            assert!(client.stamped);
            let ready_now = |client: &TimedTcp| {
                let mut cx = Context::from_waker(std::task::Waker::noop());
                client.stream.poll_read_ready(&mut cx).is_ready()
            };
            for round in 0..3u8 {
                server.write_all(&[round; 5]).await.unwrap();
                let mut buf = [0u8; 64];
                let n = client.read(&mut buf).await.unwrap();
                assert_eq!(&buf[..n], &[round; 5]);
                // Without the clearing, the stream stays readable and the next read makes a
                // `recvmsg` that finds nothing.
                assert!(!ready_now(&client), "round {round}: still marked readable");
            }
            // A read that fills its buffer does not know the socket is empty.
            server.write_all(&[9; 8]).await.unwrap();
            let mut four = [0u8; 4];
            client.read_exact(&mut four).await.unwrap();
            assert!(ready_now(&client), "four more bytes wait");
            client.read_exact(&mut four).await.unwrap();
            // Bytes that come later wake the reader: nothing is missed.
            let late = tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                server.write_all(b"late").await.unwrap();
                server
            });
            let mut buf = [0u8; 64];
            let n = tokio::time::timeout(std::time::Duration::from_secs(5), client.read(&mut buf))
                .await
                .expect("the late bytes woke the read")
                .unwrap();
            assert_eq!(&buf[..n], b"late");
            drop(late.await.unwrap());
            assert_eq!(
                client.read(&mut buf).await.unwrap(),
                0,
                "the end still reads as 0"
            );
        });
    }

    #[test]
    fn a_stamp_is_read_from_its_control_message_and_others_are_skipped() {
        let header = std::mem::size_of::<libc::cmsghdr>();
        let message = |level: i32, kind: i32, data: &[u8]| {
            let mut m = Vec::new();
            m.extend_from_slice(&(header + data.len()).to_ne_bytes());
            m.extend_from_slice(&level.to_ne_bytes());
            m.extend_from_slice(&kind.to_ne_bytes());
            m.resize(header, 0);
            m.extend_from_slice(data);
            m
        };
        let mut stamp = Vec::new();
        stamp.extend_from_slice(&1_700_000_000i64.to_ne_bytes());
        stamp.extend_from_slice(&250_000_000i64.to_ne_bytes());
        let mut control = message(
            libc::SOL_SOCKET,
            libc::SCM_RIGHTS,
            &[7, 0, 0, 0, 0, 0, 0, 0],
        );
        control.extend(message(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &stamp));
        assert_eq!(realtime_stamp(&control), Some(1_700_000_000_250_000_000));
        assert_eq!(
            realtime_stamp(&control[..control.len() - 1]),
            None,
            "cut off"
        );
        assert_eq!(realtime_stamp(&[]), None);
    }

    #[test]
    fn a_stamp_goes_onto_the_monotonic_scale_unless_it_cannot_be_right() {
        const S: i64 = 1_000_000_000;
        assert_eq!(to_monotonic(1000 * S, 1000 * S + S / 2, 20.0), Some(19.5));
        assert_eq!(
            to_monotonic(1001 * S, 1000 * S + S / 2, 20.0),
            None,
            "in the future"
        );
        assert_eq!(
            to_monotonic(900 * S, 1000 * S + S / 2, 20.0),
            None,
            "before a clock step"
        );
        // Today's stamps a microsecond apart stay a microsecond apart.
        let now_ns = 1_764_800_000 * S;
        let earlier = to_monotonic(now_ns - 2_000, now_ns, 20.0).unwrap();
        let later = to_monotonic(now_ns - 1_000, now_ns, 20.0).unwrap();
        assert!((later - earlier - 1e-6).abs() < 1e-9, "{earlier} {later}");
    }
}
