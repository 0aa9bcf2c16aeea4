//! The input audio every session streams: PCM16 silence (the default), or a WAV file
//! (`--audio`, mono PCM16 at the input rate — `--input-sample-rate`, or the protocol's: 24 kHz
//! for openai, 16 kHz otherwise —
//! only: anything else is refused before any connection, with the file's actual
//! format in the message, never resampled), replayed `--loops` times as one continuous stream
//! and cut at `--duration` when one is given.
//! It is read and encoded once per worker and shared by all its sessions.

use crate::protocol::{AudioPacket, BYTES_PER_SAMPLE};
use anyhow::{bail, Context, Result};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The longest looped input a worker holds in memory (PCM plus base64, about 75 kB a second).
pub const MAX_INPUT_S: f64 = 2.0 * 3600.0;

/// Where the input audio comes from, as validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AudioSource {
    /// PCM16 zeros.
    Silence,
    /// A mono PCM16 WAV file at the input rate, replayed `loops` times.
    Wav {
        path: PathBuf,
        /// Samples in one play of the file.
        samples: u64,
        loops: u32,
        /// `--duration`: the input ends after this many samples, before the file × `loops` does
        /// (absent: nothing is cut).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cut: Option<u64>,
        /// The file's SHA-256, in hex: two runs stream the same file only if it is the same
        /// (absent in summaries written before 2026-12-07).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
    },
    /// The project's speech sample (`assets/speech-16k.wav`, built into the binary), replayed
    /// `loops` times: the default input of protocols that recognise speech.
    Sample {
        samples: u64,
        loops: u32,
        /// As the file's: the input ends after this many samples.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cut: Option<u64>,
    },
}

/// `assets/speech-16k.wav`, so that the default works wherever the binary is.
pub const SPEECH_SAMPLE: &[u8] = include_bytes!("../assets/speech-16k.wav");

/// The built-in sample, `loops` times.
pub fn speech_sample(loops: u32) -> Result<AudioSource> {
    let reader = hound::WavReader::new(std::io::Cursor::new(SPEECH_SAMPLE))
        .context("the built-in speech sample is not a WAV file")?;
    Ok(AudioSource::Sample {
        samples: u64::from(reader.duration()),
        loops,
        cut: None,
    })
}

impl AudioSource {
    /// The input's total length in samples (cut where `--duration` cuts it), if it is a file.
    pub fn total_samples(&self) -> Option<u64> {
        let whole = self.whole_samples()?;
        Some(self.cut().map_or(whole, |cut| cut.min(whole)))
    }

    /// Whether two runs (or two shards of one) streamed the same input: the same file, by
    /// its SHA-256 (by its name when a summary from before 2026-12-07 has none), not its path
    /// (the same file given by another path, or copied to another host, is the same), of the
    /// same length, and the same samples of it — `--loops 2 -d 1s` and `--loops 1 -d 1s` of a
    /// longer file stream the same.
    pub fn streams_as(&self, other: &AudioSource) -> bool {
        let same_samples = self.total_samples() == other.total_samples();
        match (self, other) {
            (AudioSource::Silence, AudioSource::Silence) => true,
            (AudioSource::Sample { samples: a, .. }, AudioSource::Sample { samples: b, .. }) => {
                a == b && same_samples
            }
            (
                AudioSource::Wav {
                    path: p,
                    samples: a,
                    sha256: x,
                    ..
                },
                AudioSource::Wav {
                    path: q,
                    samples: b,
                    sha256: y,
                    ..
                },
            ) => {
                let same_file = match (x, y) {
                    (Some(x), Some(y)) => x == y,
                    _ => p.file_name() == q.file_name(),
                };
                same_file && a == b && same_samples
            }
            _ => false,
        }
    }

    /// The file (or sample) × its loops, in samples, before any cut.
    fn whole_samples(&self) -> Option<u64> {
        match self {
            AudioSource::Silence => None,
            AudioSource::Wav { samples, loops, .. }
            | AudioSource::Sample { samples, loops, .. } => Some(samples * u64::from(*loops)),
        }
    }

    /// Where `--duration` cut the input, in samples.
    fn cut(&self) -> Option<u64> {
        match self {
            AudioSource::Silence => None,
            AudioSource::Wav { cut, .. } | AudioSource::Sample { cut, .. } => *cut,
        }
    }

    /// The input cut after `at` samples (`--duration`); nothing is cut when the input is no
    /// longer, and silence is as long as it is asked to be.
    pub fn cut_at(mut self, at: u64) -> AudioSource {
        let whole = self.whole_samples();
        if let AudioSource::Wav { cut, .. } | AudioSource::Sample { cut, .. } = &mut self {
            *cut = whole.filter(|&whole| at < whole).map(|_| at);
        }
        self
    }
}

impl std::fmt::Display for AudioSource {
    /// As a message names it: `silence`, `the built-in speech sample (93249 samples) × 2`,
    /// `in.wav (48000 samples) × 1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AudioSource::Silence => write!(f, "silence"),
            AudioSource::Sample { samples, loops, .. } => {
                write!(
                    f,
                    "the built-in speech sample ({samples} samples) × {loops}"
                )?;
                self.write_cut(f)
            }
            AudioSource::Wav {
                path,
                samples,
                loops,
                ..
            } => {
                write!(f, "{} ({samples} samples) × {loops}", path.display())?;
                self.write_cut(f)
            }
        }
    }
}

impl AudioSource {
    /// `, cut at 48000 samples` when `--duration` cut the input.
    fn write_cut(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cut() {
            Some(cut) => write!(f, ", cut at {cut} samples"),
            None => Ok(()),
        }
    }
}

/// `16 kHz`, `22050 Hz`.
fn rate_name(rate: u32) -> String {
    if rate % 1000 == 0 {
        format!("{} kHz", rate / 1000)
    } else {
        format!("{rate} Hz")
    }
}

/// Bytes of PCM16 input in a packet of `packet_ms` at `rate`.
pub fn packet_bytes(rate: u32, packet_ms: u32) -> usize {
    (rate as usize * packet_ms as usize / 1000) * BYTES_PER_SAMPLE
}

/// The SHA-256 of the file at `path`, in hex.
pub fn file_sha256(path: &Path) -> Result<String> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)
        .with_context(|| format!("cannot read --audio {}", path.display()))?;
    let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("cannot read --audio {}", path.display()))?;
        if n == 0 {
            break;
        }
        digest.update(&buf[..n]);
    }
    Ok(digest
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Checks that `path` is a mono PCM16 WAV at `rate` with audio in it; returns its length in
/// samples. `rate` is the run's input rate, one of `protocol`'s.
pub fn probe(path: &Path, rate: u32) -> Result<u64> {
    probe_for(path, rate, None, None)
}

/// [`probe`], a file at another rate answered with what `protocol` takes: the flag that streams
/// it when its servers take that rate too (sglang-omni's PersonaPlex: 24 kHz), or against the
/// built-in native mock playing `mock`, the profile that does.
pub fn probe_for(
    path: &Path,
    rate: u32,
    protocol: Option<crate::protocol::Protocol>,
    mock: Option<crate::profile::Profile>,
) -> Result<u64> {
    let want = rate_name(rate);
    let reader = open_wav(path).map_err(|err| match err {
        // A file that cannot be opened is named as such; one that opens but ends early is not
        // a (whole) WAV file.
        hound::Error::IoError(io) if !path.is_file() => anyhow::anyhow!(
            "--audio {}: {io}; give the path of a {want} mono PCM16 WAV file",
            path.display()
        ),
        hound::Error::IoError(io) if std::fs::metadata(path).is_ok_and(|m| m.len() == 0) => {
            anyhow::anyhow!(
                "--audio {} is an empty file ({io}); give a {want} mono PCM16 WAV",
                path.display()
            )
        }
        hound::Error::IoError(io) => anyhow::anyhow!(
            "--audio {} is not a WAV file this tool can read ({io}: truncated?); give a {want} mono PCM16 WAV",
            path.display()
        ),
        other => anyhow::anyhow!(
            "--audio {} is not a WAV file this tool can read ({other}); give a {want} mono PCM16 WAV, e.g. `sox in.wav -r {rate} -c 1 -b 16 out.wav`",
            path.display()
        ),
    })?;
    let spec = reader.spec();
    let format = match spec.sample_format {
        hound::SampleFormat::Int => format!("{}-bit samples", spec.bits_per_sample),
        hound::SampleFormat::Float => format!("{}-bit float samples", spec.bits_per_sample),
    };
    if spec.sample_rate != rate
        || spec.channels != 1
        || spec.bits_per_sample != 16
        || spec.sample_format != hound::SampleFormat::Int
    {
        let takes = match protocol {
            // Mono PCM16 at a rate the protocol takes: the flag says so.
            Some(p)
                if spec.sample_rate != rate
                    && spec.channels == 1
                    && spec.bits_per_sample == 16
                    && spec.sample_format == hound::SampleFormat::Int
                    && p.input_sample_rates().contains(&spec.sample_rate) =>
            {
                // The built-in mock takes its profile's rate: the profile is the flag to give.
                if let Some((mock, flags)) =
                    mock.zip(crate::profile::Profile::offered_for(spec.sample_rate))
                {
                    return Err(anyhow::anyhow!(
                        "--audio {} is {} and the built-in mock plays {} (--profile), which takes {want}: give {flags} to stream it as it is (or a {want} WAV)",
                        path.display(),
                        rate_name(spec.sample_rate),
                        mock.name(),
                    ));
                }
                return Err(anyhow::anyhow!(
                    "--audio {} is {} and the run sends {want}: give --input-sample-rate {}{} to stream it as it is",
                    path.display(),
                    rate_name(spec.sample_rate),
                    spec.sample_rate,
                    if p == crate::protocol::Protocol::Native && spec.sample_rate == 24_000 {
                         " (sglang-omni's PersonaPlex takes 24 kHz)"
                    } else {
                        ""
                    }
                ));
            }
            Some(p) => {
                let rates: Vec<String> = p
                    .input_sample_rates()
                    .iter()
                    .map(|r| rate_name(*r))
                    .collect();
                format!(
                    "--protocol {} servers take {}",
                    p.as_str(),
                    rates.join(" or ")
                )
            }
            None => "native servers take 16 or 24 kHz as their model does, the others one rate"
                .to_string(),
        };
        bail!(
            "--audio {} must be {want} mono PCM16 WAV; got {} Hz, {} channel(s), {format} ({want} is the run's input rate: --input-sample-rate, or the protocol's; {takes}; convert it with `sox {} -r {rate} -c 1 -b 16 out.wav`: nothing is resampled silently)",
            path.display(),
            spec.sample_rate,
            spec.channels,
            path.display()
        );
    }
    let samples = u64::from(reader.duration());
    if samples == 0 {
        bail!(
            "--audio {} holds no audio (its data chunk is empty); give a WAV with speech in it",
            path.display()
        );
    }
    // The header only claims a length: read all of the data, as each worker will, so that a
    // file cut short is refused here and not by every worker once the run has started.
    let data_bytes = samples * BYTES_PER_SAMPLE as u64;
    let mut data = reader.into_inner();
    let read = std::io::copy(&mut (&mut data).take(data_bytes), &mut std::io::sink())
        .with_context(|| format!("cannot read --audio {}", path.display()))?;
    if read < data_bytes {
        bail!(
            "--audio {} is truncated: its header promises {samples} samples ({:.3} s) but the file holds {} ({:.3} s); give a whole {want} mono PCM16 WAV",
            path.display(),
            samples as f64 / f64::from(rate),
            read / BYTES_PER_SAMPLE as u64,
            (read / BYTES_PER_SAMPLE as u64) as f64 / f64::from(rate),
        );
    }
    Ok(samples)
}

/// The bytes of a WAV file as hound reads them: the file itself, or the file laid out again
/// where hound would misread it (see [`open_wav`]).
enum WavBytes {
    File(std::io::BufReader<std::fs::File>),
    /// A header written anew, then the file's data chunk read where it is (never the whole
    /// file in memory: a long recording's is gigabytes).
    Mended(
        std::io::Chain<std::io::Cursor<Vec<u8>>, std::io::Take<std::io::BufReader<std::fs::File>>>,
    ),
}

impl std::io::Read for WavBytes {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            WavBytes::File(file) => file.read(buf),
            WavBytes::Mended(bytes) => bytes.read(buf),
        }
    }
}

/// Opens a WAV file for hound, which reads most files as they are but some that Python's `wave`
/// reads it misreads or refuses: it skips a chunk by its length and not the pad byte RIFF puts
/// after an odd-length chunk (a `LIST` of odd length before `data` then reads as a truncated
/// file); it takes a data length of 0xFFFFFFFF, which streaming writers leave when they cannot
/// seek back ("until the end of the file"), at its word (or 0, as some do); and it refuses a PCM
/// `fmt ` with extra bytes or a byte rate that does not add up ([`mended_fmt`]). Such a file is
/// handed to hound as a header of `fmt ` and `data` alone, then its data chunk, as long as the
/// file holds.
fn open_wav(path: &Path) -> hound::Result<hound::WavReader<WavBytes>> {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path)?;
    match mended_wav(&mut file)? {
        Some((header, data_len)) => {
            let data = std::io::BufReader::new(file).take(data_len);
            hound::WavReader::new(WavBytes::Mended(std::io::Cursor::new(header).chain(data)))
        }
        None => {
            use std::io::Seek as _;
            file.rewind()?;
            hound::WavReader::new(WavBytes::File(std::io::BufReader::new(file)))
        }
    }
}

/// The longest `fmt ` chunk read (a `WAVE_FORMAT_EXTENSIBLE` one is 40 bytes).
const MAX_FMT_BYTES: u32 = 4096;

/// The header to give hound before `file`'s data chunk, and that chunk's length, when hound
/// would misread the file as it is (see [`open_wav`]), `file` left at the data; `None` when
/// hound reads it right, or when it is no RIFF WAVE that this walk understands (hound then
/// names what is wrong with it).
fn mended_wav(file: &mut std::fs::File) -> std::io::Result<Option<(Vec<u8>, u64)>> {
    use std::io::Seek as _;
    let mut riff = [0u8; 12];
    if file.read_exact(&mut riff).is_err() || &riff[..4] != b"RIFF" || &riff[8..] != b"WAVE" {
        return Ok(None);
    }
    let mut fmt: Option<Vec<u8>> = None;
    // Something hound would misread was met: a pad byte, or a `fmt ` it refuses.
    let mut mend = false;
    loop {
        let mut header = [0u8; 8];
        if file.read_exact(&mut header).is_err() {
            return Ok(None);
        }
        let len = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        match &header[..4] {
            b"data" => {
                let at = file.stream_position()?;
                let rest = file.metadata()?.len().saturating_sub(at);
                let until_end =
                    len == u32::MAX || (len == 0 && rest > 0 && !chunk_follows(file, rest)?);
                let Some(fmt) = fmt.filter(|_| mend || until_end) else {
                    return Ok(None);
                };
                let data_len = if until_end {
                    u32::try_from(rest & !1).unwrap_or(u32::MAX - 1)
                } else {
                    len
                };
                let mut out = Vec::with_capacity(44 + fmt.len());
                out.extend_from_slice(b"RIFF");
                let riff_len = 4 + 8 + fmt.len() as u64 + 8 + u64::from(data_len);
                out.extend_from_slice(&u32::try_from(riff_len).unwrap_or(u32::MAX).to_le_bytes());
                out.extend_from_slice(b"WAVE");
                out.extend_from_slice(b"fmt ");
                out.extend_from_slice(&(fmt.len() as u32).to_le_bytes());
                out.extend_from_slice(&fmt);
                out.extend_from_slice(b"data");
                out.extend_from_slice(&data_len.to_le_bytes());
                return Ok(Some((out, u64::from(data_len))));
            }
            b"fmt " if len <= MAX_FMT_BYTES => {
                let mut body = vec![0u8; len as usize];
                if file.read_exact(&mut body).is_err() {
                    return Ok(None);
                }
                if let Some(mended) = mended_fmt(&body) {
                    body = mended;
                    mend = true;
                }
                fmt = Some(body);
            }
            _ => {
                file.seek(std::io::SeekFrom::Current(i64::from(len)))?;
            }
        }
        if len % 2 == 1 {
            mend = true;
            file.seek(std::io::SeekFrom::Current(1))?;
        }
    }
}

/// A PCM `fmt ` chunk as hound reads it, when it would refuse one that Python's `wave` (and so
/// Fun-ASR's benchmark client) reads: a plain PCM chunk of another length than 16 or 18 (a
/// `cbSize` with extra bytes after it), or a byte rate or block align that does not follow
/// from the channels, rate and bits. `None` when it reads as it is, or is not plain PCM.
fn mended_fmt(body: &[u8]) -> Option<Vec<u8>> {
    if body.len() < 16 {
        return None;
    }
    let u16_at = |i: usize| u16::from_le_bytes([body[i], body[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([body[i], body[i + 1], body[i + 2], body[i + 3]]);
    let (tag, channels, rate, bits) = (u16_at(0), u16_at(2), u32_at(4), u16_at(14));
    if tag != 1 || channels == 0 || bits == 0 || bits % 8 != 0 {
        return None;
    }
    let align = u32::from(channels) * u32::from(bits / 8);
    let consistent = u32_at(8) == rate.saturating_mul(align) && u32::from(u16_at(12)) == align;
    if consistent && (body.len() == 16 || body.len() == 18) {
        return None;
    }
    let mut fmt = body[..16].to_vec();
    fmt[8..12].copy_from_slice(&rate.saturating_mul(align).to_le_bytes());
    fmt[12..14].copy_from_slice(&u16::try_from(align).unwrap_or(u16::MAX).to_le_bytes());
    Some(fmt)
}

/// Whether the `rest` of the file after `file`'s position is chunks (each a header of four
/// ASCII letters and a length, and its body with the pad byte), ending exactly at the end of
/// the file; `file` is left where it was. A `data` chunk of length 0 followed by chunks is
/// empty; followed by anything else, it is a stream whose writer could not seek back to write
/// its length (audio that happens to start with letters does not end on a chunk boundary).
fn chunk_follows(file: &mut std::fs::File, rest: u64) -> std::io::Result<bool> {
    use std::io::Seek as _;
    let at = file.stream_position()?;
    let mut offset = 0u64;
    let mut follows = false;
    // A few chunks at most follow the data (LIST, id3, cue, …).
    for _ in 0..16 {
        if offset == rest {
            follows = offset > 0;
            break;
        }
        let mut header = [0u8; 8];
        if rest - offset < 8 || file.read_exact(&mut header).is_err() {
            break;
        }
        let letters = header[..4]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b' ');
        let len = u64::from(u32::from_le_bytes([
            header[4], header[5], header[6], header[7],
        ]));
        let next = offset + 8 + len + len % 2;
        // The last chunk's pad byte may be missing.
        if !letters || next > rest + len % 2 {
            break;
        }
        offset = next.min(rest);
        file.seek(std::io::SeekFrom::Start(at + offset))?;
    }
    file.seek(std::io::SeekFrom::Start(at))?;
    Ok(follows)
}

/// The PCM16 little-endian bytes of one play of a WAV, at most `max_bytes` of it (what the run
/// streams of a longer file: a worker holds no more).
fn read_pcm<R: std::io::Read>(
    mut reader: hound::WavReader<R>,
    what: &str,
    max_bytes: usize,
) -> Result<Vec<u8>> {
    let whole = reader.duration() as usize * BYTES_PER_SAMPLE;
    let mut one = Vec::with_capacity(whole.min(max_bytes));
    for sample in reader.samples::<i16>().take(max_bytes / BYTES_PER_SAMPLE) {
        let sample = sample.with_context(|| format!("cannot read {what}"))?;
        one.extend_from_slice(&sample.to_le_bytes());
    }
    Ok(one)
}

/// The input audio of every session, cut into packets, each packet also base64-encoded once.
pub struct Audio {
    /// The whole stream (one packet of it for silence).
    pcm: Vec<u8>,
    /// The base64 of every packet, one after the other.
    b64: String,
    /// Where packet k's base64 starts (and, at k + 1, ends); silence has two packets.
    b64_offsets: Vec<usize>,
    packet_bytes: usize,
    /// Silence: every packet is the same (but the last, which may be short).
    silence: bool,
    last_bytes: usize,
    packets: u32,
}

impl Audio {
    /// The audio of `packets` packets of `packet_ms` at `rate` from `source`, `total_bytes` in
    /// all.
    pub fn load(
        source: &AudioSource,
        rate: u32,
        packet_ms: u32,
        packets: u32,
        total_bytes: usize,
    ) -> Result<Audio> {
        let packet_bytes = packet_bytes(rate, packet_ms);
        let last_bytes = total_bytes - (packets as usize - 1) * packet_bytes;
        match source {
            AudioSource::Silence => {
                let pcm = vec![0u8; packet_bytes];
                Ok(Audio::encode(
                    pcm,
                    &[packet_bytes, last_bytes],
                    packets,
                    true,
                ))
            }
            AudioSource::Wav { path, loops, .. } => {
                let reader = open_wav(path)
                    .with_context(|| format!("cannot open --audio {}", path.display()))?;
                let what = format!("--audio {}", path.display());
                let one = read_pcm(reader, &what, total_bytes)?;
                Ok(Audio::looped(
                    &one,
                    *loops,
                    packet_bytes,
                    packets,
                    total_bytes,
                ))
            }
            AudioSource::Sample { loops, .. } => {
                let reader = hound::WavReader::new(std::io::Cursor::new(SPEECH_SAMPLE))
                    .context("the built-in speech sample is not a WAV file")?;
                let one = read_pcm(reader, "the built-in speech sample", total_bytes)?;
                Ok(Audio::looped(
                    &one,
                    *loops,
                    packet_bytes,
                    packets,
                    total_bytes,
                ))
            }
        }
    }

    /// `one` play of the input, `loops` times, cut into packets.
    fn looped(
        one: &[u8],
        loops: u32,
        packet_bytes: usize,
        packets: u32,
        total_bytes: usize,
    ) -> Audio {
        let mut pcm = Vec::with_capacity(total_bytes);
        while pcm.len() < total_bytes {
            let take = (total_bytes - pcm.len()).min(one.len());
            pcm.extend_from_slice(&one[..take]);
        }
        debug_assert!(pcm.len() <= one.len() * loops as usize);
        let sizes: Vec<usize> = (0..packets as usize)
            .map(|k| packet_bytes.min(total_bytes - k * packet_bytes))
            .collect();
        Audio::encode(pcm, &sizes, packets, false)
    }

    fn encode(pcm: Vec<u8>, sizes: &[usize], packets: u32, silence: bool) -> Audio {
        let engine = &base64::engine::general_purpose::STANDARD;
        let mut b64 = String::with_capacity(pcm.len() * 4 / 3 + 4 * sizes.len());
        let mut b64_offsets = Vec::with_capacity(sizes.len() + 1);
        let mut at = 0;
        for &size in sizes {
            b64_offsets.push(b64.len());
            // Silence has one packet of PCM: both of its packets are cut from it.
            let start = if silence { 0 } else { at };
            engine.encode_string(&pcm[start..start + size], &mut b64);
            at += size;
        }
        b64_offsets.push(b64.len());
        Audio {
            packet_bytes: sizes.first().copied().unwrap_or(0),
            last_bytes: sizes.last().copied().unwrap_or(0),
            pcm,
            b64,
            b64_offsets,
            silence,
            packets,
        }
    }

    /// The input's bytes of PCM, every packet's together (the last may be short).
    pub fn total_bytes(&self) -> u64 {
        u64::from(self.packets.saturating_sub(1)) * self.packet_bytes as u64
            + self.last_bytes as u64
    }

    /// Packet `seq` (of `0..packets`): its PCM and its base64.
    pub fn packet(&self, seq: u32) -> AudioPacket<'_> {
        let last = seq + 1 >= self.packets;
        let (pcm, b64_index) = if self.silence {
            let bytes = if last {
                self.last_bytes
            } else {
                self.packet_bytes
            };
            (&self.pcm[..bytes], usize::from(last))
        } else {
            let k = (seq.min(self.packets - 1)) as usize;
            let start = k * self.packet_bytes;
            let end = (start + self.packet_bytes).min(self.pcm.len());
            (&self.pcm[start..end], k)
        };
        AudioPacket {
            pcm,
            b64: &self.b64[self.b64_offsets[b64_index]..self.b64_offsets[b64_index + 1]],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_compare_what_was_streamed_not_the_path_or_loops_that_asked_for_it() {
        let wav = |path: &str, loops: u32, cut: Option<u64>, sha: Option<&str>| AudioSource::Wav {
            path: PathBuf::from(path),
            samples: 48_000,
            loops,
            cut,
            sha256: sha.map(str::to_string),
        };
        // The same samples through other --loops, or the same file by another path (another
        // host's copy), stream the same.
        let a = wav("in.wav", 2, Some(16_000), Some("aa"));
        assert!(a.streams_as(&wav("/data/in.wav", 1, Some(16_000), Some("aa"))));
        assert!(a.streams_as(&wav("/data/other-name.wav", 1, Some(16_000), Some("aa"))));
        // Two files of one name and length: different content (en/ and zh/ prompts).
        assert!(!a.streams_as(&wav("zh/in.wav", 2, Some(16_000), Some("bb"))));
        // A summary without the hash (before 2026-12-07): by name.
        assert!(a.streams_as(&wav("x/in.wav", 1, Some(16_000), None)));
        assert!(!a.streams_as(&wav("x/other.wav", 1, Some(16_000), None)));
        // A different length streamed, or a second play, differs.
        let one = wav("in.wav", 1, None, Some("aa"));
        assert!(!one.streams_as(&wav("in.wav", 1, Some(16_000), Some("aa"))));
        assert!(!one.streams_as(&wav("in.wav", 2, None, Some("aa"))));
        assert!(AudioSource::Silence.streams_as(&AudioSource::Silence));
        assert!(!AudioSource::Silence.streams_as(&one));
    }

    #[test]
    fn an_audio_source_is_named_in_words_not_as_a_rust_value() {
        // `report --vs` names the input that differs between two runs with this.
        assert_eq!(AudioSource::Silence.to_string(), "silence");
        let sample = AudioSource::Sample {
            samples: 93_249,
            loops: 2,
            cut: None,
        };
        assert_eq!(
            sample.to_string(),
            "the built-in speech sample (93249 samples) × 2"
        );
        let file = AudioSource::Wav {
            path: "in.wav".into(),
            samples: 48_000,
            loops: 1,
            cut: None,
            sha256: None,
        };
        assert_eq!(file.to_string(), "in.wav (48000 samples) × 1");
        assert_eq!(
            file.cut_at(24_000).to_string(),
            "in.wav (48000 samples) × 1, cut at 24000 samples"
        );
    }

    #[test]
    fn a_cut_shortens_the_input_and_a_cut_past_its_end_changes_nothing() {
        let file = AudioSource::Wav {
            path: "in.wav".into(),
            samples: 48_000,
            loops: 2,
            cut: None,
            sha256: None,
        };
        assert_eq!(file.clone().cut_at(50_000).total_samples(), Some(50_000));
        assert_eq!(
            file.clone().cut_at(96_000),
            file,
            "the whole input: nothing cut"
        );
        assert_eq!(file.clone().cut_at(100_000), file);
        assert_eq!(AudioSource::Silence.cut_at(10), AudioSource::Silence);
    }

    fn wav(name: &str, spec: hound::WavSpec, samples: u32) -> PathBuf {
        let path = std::env::temp_dir().join(format!(
            "duplexbench-audio-{}-{name}.wav",
            std::process::id()
        ));
        let mut w = hound::WavWriter::create(&path, spec).unwrap();
        for i in 0..samples {
            match spec.sample_format {
                hound::SampleFormat::Float => w.write_sample(i as f32 / 1e5).unwrap(),
                hound::SampleFormat::Int if spec.bits_per_sample == 8 => {
                    w.write_sample((i % 100) as i8).unwrap()
                }
                hound::SampleFormat::Int => w.write_sample((i % 30_000) as i16).unwrap(),
            }
        }
        w.finalize().unwrap();
        path
    }

    fn spec(rate: u32, channels: u16, bits: u16, format: hound::SampleFormat) -> hound::WavSpec {
        hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: bits,
            sample_format: format,
        }
    }

    #[test]
    fn a_wav_of_another_format_is_refused_with_its_actual_format_issue_11() {
        use hound::SampleFormat::{Float, Int};
        for (name, s, got) in [
            (
                "44k",
                spec(44_100, 1, 16, Int),
                "got 44100 Hz, 1 channel(s), 16-bit samples",
            ),
            (
                "stereo",
                spec(16_000, 2, 16, Int),
                "got 16000 Hz, 2 channel(s), 16-bit samples",
            ),
            (
                "8bit",
                spec(16_000, 1, 8, Int),
                "got 16000 Hz, 1 channel(s), 8-bit samples",
            ),
            ("float", spec(16_000, 1, 32, Float), "32-bit float samples"),
        ] {
            let path = wav(name, s, 1600);
            let err = probe(&path, 16_000).unwrap_err().to_string();
            assert!(err.contains("must be 16 kHz mono PCM16 WAV"), "{err}");
            assert!(err.contains(got), "{name}: {err}");
            let _ = std::fs::remove_file(path);
        }
    }

    #[test]
    fn a_file_that_is_not_a_wav_or_is_truncated_is_refused() {
        let path =
            std::env::temp_dir().join(format!("duplexbench-audio-{}-junk.wav", std::process::id()));
        std::fs::write(&path, b"RIFF\x10\x00\x00\x00WAVEfmt ").unwrap();
        let err = probe(&path, 16_000).unwrap_err().to_string();
        assert!(err.contains("is not a WAV file"), "{err}");
        std::fs::write(&path, b"hello, not audio at all").unwrap();
        let err = probe(&path, 16_000).unwrap_err().to_string();
        assert!(err.contains("is not a WAV file"), "{err}");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_wav_whose_data_ends_before_its_header_says_is_refused_as_truncated() {
        let whole = wav("whole", spec(16_000, 1, 16, hound::SampleFormat::Int), 3200);
        let bytes = std::fs::read(&whole).unwrap();
        // Cut in the data, at its start (the header alone), and in the middle of a sample.
        for (name, len, held) in [("cut", 1000, 478), ("header", 44, 0), ("odd", 1001, 478)] {
            let path = std::env::temp_dir().join(format!(
                "duplexbench-audio-{}-{name}.wav",
                std::process::id()
            ));
            std::fs::write(&path, &bytes[..len]).unwrap();
            let err = probe(&path, 16_000).unwrap_err().to_string();
            assert!(
                err.contains(&format!(
                    "is truncated: its header promises 3200 samples (0.200 s) but the file holds {held}"
                )),
                "{name}: {err}"
            );
            let _ = std::fs::remove_file(path);
        }
        assert_eq!(probe(&whole, 16_000).unwrap(), 3200);
        let _ = std::fs::remove_file(whole);
    }

    #[test]
    fn loops_replay_the_file_as_one_stream_cut_into_packets() {
        // 0.2 s of audio (3200 samples), looped 3 times: 0.6 s = 7.5 packets of 80 ms.
        let path = wav("loop", spec(16_000, 1, 16, hound::SampleFormat::Int), 3200);
        let samples = probe(&path, 16_000).unwrap();
        assert_eq!(samples, 3200);
        let source = AudioSource::Wav {
            path: path.clone(),
            samples,
            loops: 3,
            cut: None,
            sha256: None,
        };
        // --duration 0.3 s: the second play is cut after 1600 samples, mid-packet.
        let cut = source.clone().cut_at(4800);
        let total = cut.total_samples().unwrap() as usize * 2;
        let audio = Audio::load(&cut, 16_000, 80, 4, total).unwrap();
        let sent: Vec<u8> = (0..4).flat_map(|k| audio.packet(k).pcm.to_vec()).collect();
        assert_eq!(sent.len(), 4800 * 2);
        assert_eq!(
            &sent[6400..6404],
            &[0, 0, 1, 0],
            "the second play from its start"
        );
        assert_eq!(
            audio.packet(3).pcm.len(),
            960 * 2,
            "the last packet: what is left of 0.3 s"
        );

        let total = source.total_samples().unwrap() as usize * 2;
        let audio = Audio::load(&source, 16_000, 80, 8, total).unwrap();
        let sent: Vec<u8> = (0..8).flat_map(|k| audio.packet(k).pcm.to_vec()).collect();
        assert_eq!(sent.len(), 3 * 3200 * 2, "exactly 3 times the samples");
        // The second play starts again at sample 0.
        assert_eq!(&sent[6400..6404], &[0, 0, 1, 0]);
        let b64 = base64::engine::general_purpose::STANDARD;
        for k in 0..8 {
            let p = audio.packet(k);
            assert_eq!(b64.decode(p.b64).unwrap(), p.pcm);
        }
        assert_eq!(audio.packet(7).pcm.len(), 1280, "the last packet is short");
        assert_eq!(audio.total_bytes(), 3 * 3200 * 2);
        let _ = std::fs::remove_file(path);
    }

    /// A 16 kHz mono PCM16 WAV laid out by hand: `fmt `, the `extra` chunks, then `data`
    /// whose header says `data_len` and which holds `samples` samples (i, as i16).
    fn raw_wav(name: &str, extra: &[(&[u8; 4], &[u8])], data_len: u32, samples: u16) -> PathBuf {
        wav_of(name, &pcm_fmt(), extra, data_len, samples)
    }

    /// The 16-byte `fmt ` of 16 kHz mono PCM16.
    fn pcm_fmt() -> Vec<u8> {
        let mut fmt = Vec::new();
        for field in [1u16, 1] {
            fmt.extend_from_slice(&field.to_le_bytes());
        }
        fmt.extend_from_slice(&16_000u32.to_le_bytes());
        fmt.extend_from_slice(&32_000u32.to_le_bytes());
        fmt.extend_from_slice(&2u16.to_le_bytes());
        fmt.extend_from_slice(&16u16.to_le_bytes());
        fmt
    }

    /// A RIFF WAVE file of a `fmt ` chunk holding `fmt`, the `extra` chunks (padded), and a
    /// `data` chunk saying `data_len` bytes and holding `samples` samples (0, 1, 2, …).
    fn wav_of(
        name: &str,
        fmt: &[u8],
        extra: &[(&[u8; 4], &[u8])],
        data_len: u32,
        samples: u16,
    ) -> PathBuf {
        let mut chunks = Vec::new();
        chunks.extend_from_slice(b"fmt ");
        chunks.extend_from_slice(&(fmt.len() as u32).to_le_bytes());
        chunks.extend_from_slice(fmt);
        for (id, body) in extra {
            chunks.extend_from_slice(*id);
            chunks.extend_from_slice(&(body.len() as u32).to_le_bytes());
            chunks.extend_from_slice(body);
            if body.len() % 2 == 1 {
                chunks.push(0);
            }
        }
        chunks.extend_from_slice(b"data");
        chunks.extend_from_slice(&data_len.to_le_bytes());
        for i in 0..samples {
            chunks.extend_from_slice(&i.to_le_bytes());
        }
        let mut file = b"RIFF".to_vec();
        file.extend_from_slice(&(4 + chunks.len() as u32).to_le_bytes());
        file.extend_from_slice(b"WAVE");
        file.extend_from_slice(&chunks);
        let path = std::env::temp_dir().join(format!(
            "duplexbench-audio-{}-{name}.wav",
            std::process::id()
        ));
        std::fs::write(&path, file).unwrap();
        path
    }

    fn played(path: &Path, samples: u64) -> Vec<u8> {
        let source = AudioSource::Wav {
            path: path.to_path_buf(),
            samples,
            loops: 1,
            cut: None,
            sha256: None,
        };
        let total = samples as usize * 2;
        let packets = total.div_ceil(packet_bytes(16_000, 80)) as u32;
        let audio = Audio::load(&source, 16_000, 80, packets, total).unwrap();
        (0..packets)
            .flat_map(|k| audio.packet(k).pcm.to_vec())
            .collect()
    }

    #[test]
    fn a_wav_with_an_odd_length_chunk_before_its_data_is_read_past_the_pad_byte() {
        // RIFF pads a chunk of odd length with one byte (a `LIST` of tags, say); hound skips
        // the length alone and read such a file as truncated.
        let list = b"INFOISFT\x05\x00\x00\x00Lavf\x00";
        assert_eq!(list.len() % 2, 1);
        let want: Vec<u8> = (0..2000u16).flat_map(u16::to_le_bytes).collect();
        let path = raw_wav("oddlist", &[(b"LIST", list)], 4000, 2000);
        assert_eq!(probe(&path, 16_000).unwrap(), 2000);
        assert_eq!(played(&path, 2000), want);
        // An even one and none at all read as before.
        let even = raw_wav(
            "evenlist",
            &[(b"LIST", b"INFOISFT\x04\x00\x00\x00Lavf")],
            4000,
            2000,
        );
        assert_eq!(probe(&even, 16_000).unwrap(), 2000);
        assert_eq!(played(&even, 2000), want);
        // Cut short, it is still refused as truncated, with its length as its header says.
        let cut = raw_wav("oddcut", &[(b"LIST", list)], 4000, 1000);
        let err = probe(&cut, 16_000).unwrap_err().to_string();
        assert!(
            err.contains("its header promises 2000 samples (0.125 s) but the file holds 1000"),
            "{err}"
        );
        for p in [path, even, cut] {
            let _ = std::fs::remove_file(p);
        }
    }

    #[test]
    fn a_streamed_wav_whose_data_length_says_until_the_end_is_read_to_its_end() {
        // A writer that could not seek back leaves 0xFFFFFFFF: the data is what the file holds.
        let path = raw_wav("streamed", &[], u32::MAX, 1600);
        assert_eq!(probe(&path, 16_000).unwrap(), 1600);
        let want: Vec<u8> = (0..1600u16).flat_map(u16::to_le_bytes).collect();
        assert_eq!(played(&path, 1600), want);
        let _ = std::fs::remove_file(path);
    }

    /// Some streaming writers leave a data length of 0: the data is what the file holds (it was
    /// refused as empty). A data chunk of 0 that another chunk follows is empty.
    #[test]
    fn a_streamed_wav_whose_data_length_is_0_is_read_to_its_end() {
        let path = raw_wav("streamed0", &[], 0, 1600);
        assert_eq!(probe(&path, 16_000).unwrap(), 1600);
        let want: Vec<u8> = (0..1600u16).flat_map(u16::to_le_bytes).collect();
        assert_eq!(played(&path, 1600), want);
        // `data` of 0, then a `LIST` chunk: nothing to stream.
        let empty0 = raw_wav("empty0", &[], 0, 0);
        let mut bytes = std::fs::read(&empty0).unwrap();
        bytes.extend_from_slice(b"LIST\x04\x00\x00\x00INFO");
        let riff_len = (bytes.len() - 8) as u32;
        bytes[4..8].copy_from_slice(&riff_len.to_le_bytes());
        let empty = std::env::temp_dir().join(format!(
            "duplexbench-audio-{}-empty0b.wav",
            std::process::id()
        ));
        std::fs::write(&empty, bytes).unwrap();
        let err = probe(&empty, 16_000).unwrap_err().to_string();
        assert!(err.contains("holds no audio"), "{err}");
        // Audio that starts with what looks like a chunk header (two loud samples, `AAAA`,
        // then a length that fits) is still audio: it does not end on a chunk boundary.
        let look0 = raw_wav("look0", &[], 0, 0);
        let mut bytes = std::fs::read(&look0).unwrap();
        bytes.extend_from_slice(b"AAAA");
        bytes.extend_from_slice(&100u32.to_le_bytes());
        bytes.extend_from_slice(&[0u8; 3192]);
        let riff_len = (bytes.len() - 8) as u32;
        bytes[4..8].copy_from_slice(&riff_len.to_le_bytes());
        let look = std::env::temp_dir().join(format!(
            "duplexbench-audio-{}-look0b.wav",
            std::process::id()
        ));
        std::fs::write(&look, bytes).unwrap();
        assert_eq!(probe(&look, 16_000).unwrap(), 1600);
        for p in [path, empty0, empty, look0, look] {
            let _ = std::fs::remove_file(p);
        }
    }

    /// PCM `fmt ` chunks that Python's `wave` reads (so Fun-ASR's benchmark streams them) and
    /// hound refused: a `cbSize` with extra bytes (20 bytes), a byte rate that does not add up.
    #[test]
    fn a_pcm_fmt_with_extra_bytes_or_a_wrong_byte_rate_is_read_as_python_reads_it() {
        let fmt = pcm_fmt();
        let mut extra = fmt.clone();
        extra.extend_from_slice(&[2, 0, 0xAB, 0xCD]);
        let mut rate = fmt.clone();
        rate[8..12].copy_from_slice(&12_345u32.to_le_bytes());
        let want: Vec<u8> = (0..1600u16).flat_map(u16::to_le_bytes).collect();
        for (name, body) in [("fmt20", extra), ("byterate", rate)] {
            let path = wav_of(name, &body, &[], 3200, 1600);
            assert_eq!(probe(&path, 16_000).unwrap(), 1600, "{name}");
            assert_eq!(played(&path, 1600), want, "{name}");
            let _ = std::fs::remove_file(path);
        }
        // A well-formed chunk is left as it is.
        assert_eq!(mended_fmt(&fmt), None);
    }

    /// A run that streams the first seconds of a long file holds those, not the file (a
    /// worker held 4 GB to stream 3 s of an 18-hour recording).
    #[test]
    fn a_cut_reads_only_what_is_streamed() {
        let path = raw_wav("long", &[], u32::MAX, 16_000);
        let source = AudioSource::Wav {
            path: path.clone(),
            samples: 16_000,
            loops: 1,
            cut: Some(1600),
            sha256: None,
        };
        let total: usize = 1600 * 2;
        let packets = total.div_ceil(packet_bytes(16_000, 80)) as u32;
        // What a worker reads of the file: the cut, not the play.
        let read = read_pcm(open_wav(&path).unwrap(), "x", total).unwrap();
        assert_eq!(read.len(), total);
        assert!(read.capacity() <= total, "{}", read.capacity());
        let audio = Audio::load(&source, 16_000, 80, packets, total).unwrap();
        let want: Vec<u8> = (0..1600u16).flat_map(u16::to_le_bytes).collect();
        assert_eq!(audio.pcm, want);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn a_wav_at_another_rate_than_the_input_rate_is_refused_not_resampled_issue_12() {
        let path = wav("16k", spec(16_000, 1, 16, hound::SampleFormat::Int), 1600);
        let err = probe(&path, 24_000).unwrap_err().to_string();
        assert!(
            err.contains("must be 24 kHz mono PCM16 WAV; got 16000 Hz"),
            "{err}"
        );
        assert!(err.contains("the run's input rate"), "{err}");
        assert!(
            err.contains("convert it with `sox") && !err.contains("give --input-sample-rate"),
            "no protocol takes another rate, so none is suggested: {err}"
        );
        assert!(err.contains("nothing is resampled silently"), "{err}");
        assert_eq!(probe(&path, 16_000).unwrap(), 1600);
        // What the protocol takes: a rate its servers take is streamed with the flag that says
        // so; another is named with the protocol's rates.
        let native = Some(crate::protocol::Protocol::Native);
        let at_24k = wav("24k", spec(24_000, 1, 16, hound::SampleFormat::Int), 2400);
        let err = probe_for(&at_24k, 16_000, native, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is 24 kHz and the run sends 16 kHz: give --input-sample-rate 24000")
                && err.contains("PersonaPlex takes 24 kHz"),
            "{err}"
        );
        // Against the built-in mock, the profile that takes the file's rate.
        let mock = Some(crate::profile::Profile::Personaplex);
        let err = probe_for(&path, 24_000, native, mock)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("is 16 kHz and the built-in mock plays personaplex (--profile), which takes 24 kHz: give --profile voicechat or --profile minicpmo to stream it as it is"),
            "{err}"
        );
        let vllm = Some(crate::protocol::Protocol::Vllm);
        let err = probe_for(&at_24k, 16_000, vllm, None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--protocol vllm servers take 16 kHz;") && !err.contains("native"),
            "{err}"
        );
        let _ = std::fs::remove_file(at_24k);
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn silence_is_two_packets_of_zeros() {
        let audio = Audio::load(&AudioSource::Silence, 16_000, 80, 13, 12 * 2560 + 1280).unwrap();
        assert_eq!(audio.packet(0).pcm.len(), 2560);
        assert_eq!(audio.packet(12).pcm.len(), 1280);
        assert!(audio.packet(5).pcm.iter().all(|&b| b == 0));
        assert_eq!(audio.packet(0).b64.len(), 3416);
        assert_eq!(audio.total_bytes(), 12 * 2560 + 1280);
    }
}
