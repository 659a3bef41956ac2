//! Output files: the rules every command that writes a file follows.
//!
//! A command that writes (`plan -o`, `seal`, `synth -o`, `solve --generate`) opens its
//! [`Destination`] before it does any work, so a bad output path fails in milliseconds, not
//! after a long plan, and then writes through it. The rules (also in `docs/security.md`):
//!
//! 1. **Regular files only, replaced atomically.** The bytes go to a temporary file in the
//!    destination's directory, are flushed and synced, and the temporary file is renamed over
//!    the destination. A reader sees the old file or the new one, never a part. A
//!    destination that exists and is not a regular file (a directory, a character or block
//!    device such as `/dev/null`, a FIFO, a socket) is refused: renaming over it would
//!    replace the device node itself. Standard output is the way to stream.
//! 2. **Symbolic links are followed, never replaced.** A destination that is a link is
//!    resolved (through every level); the file it points to is replaced atomically and the
//!    link stays. A link whose target does not exist is refused.
//! 3. **An input is never overwritten unless asked.** When the destination is the same file
//!    as one of the command's inputs (same device and inode, through links), the command
//!    refuses; `plan --overwrite-input` asks. `seal` rewrites its request by design.
//! 4. **Temporary files have recognisable names** (`NAME.jointplan-partial-XXXXXX`, beside
//!    the destination), are removed on every error, and are removed on SIGTERM and SIGINT
//!    by [`install_interrupt_cleanup`]; only a hard kill (SIGKILL, power loss) can leave one.
//! 5. **Permissions**: a new file gets what `File::create` would give (0o666 less the
//!    umask); a replaced file keeps its permission bits.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

/// The part of a temporary file's name that marks it as jointplan's.
pub const PARTIAL_MARKER: &str = ".jointplan-partial-";

/// Why an output cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum DestinationError {
    /// The destination breaks one of the output rules.
    #[error("{}: {reason}", file.display())]
    Refused {
        /// The destination as given.
        file: PathBuf,
        /// Which rule, and what to do.
        reason: String,
    },
    /// The operating system failed a write, a sync or the rename.
    #[error("{}: cannot write: {source}", file.display())]
    Io {
        /// The destination as given.
        file: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Temporary files not yet renamed into place, removed if the process is interrupted.
static PENDING: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

fn pending() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    // A panic while holding the lock leaves a set that is still correct.
    PENDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Removes every pending temporary file on SIGTERM or SIGINT, then exits with status
/// 128 + the signal number (143 or 130), as a shell reports a killed process. Call once,
/// at start-up; a failure to install is reported and the command goes on without it.
pub fn install_interrupt_cleanup() {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = match signal_hook::iterator::Signals::new([SIGTERM, SIGINT]) {
        Ok(signals) => signals,
        Err(error) => {
            eprintln!("jointplan: warning: cannot watch for SIGTERM/SIGINT ({error}); an interrupted write may leave a `*{PARTIAL_MARKER}*` file");
            return;
        }
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            for file in pending().iter() {
                let _ = std::fs::remove_file(file);
            }
            std::process::exit(128 + signal);
        }
    });
}

/// An output file, checked against the rules and with its temporary file already created.
#[derive(Debug)]
pub struct Destination {
    /// The path as the user gave it (used in messages).
    given: PathBuf,
    /// The file that is replaced: `given` with every symbolic link resolved.
    target: PathBuf,
    /// The temporary file; `None` once it has been renamed into place.
    temporary: Option<tempfile::NamedTempFile>,
    /// The thread of a [`StreamingFile`]'s write-behind syncs, joined before the rename.
    background_sync: Mutex<Option<BackgroundSync>>,
    /// The outcome of [`Destination::sync`] when it ran before the commit: the commit
    /// reports a failure kept here rather than sync again (a second `fsync` after a failed
    /// one can succeed without the lost data being on disk).
    synced: Option<Result<(), DestinationError>>,
}

/// The thread of write-behind syncs: how many syncs it ran, or the first that failed.
type BackgroundSync = std::thread::JoinHandle<std::io::Result<u64>>;

/// Bytes a [`StreamingFile`] writes between two requests to sync in the background.
pub const WRITE_BEHIND_STEP: u64 = 64 << 20;

/// A writer into a destination's temporary file that has the bytes written so far synced
/// in the background every [`WRITE_BEHIND_STEP`] bytes (see
/// [`Destination::streaming_writer`]). Dropping it ends the background syncs.
pub struct StreamingFile<'d> {
    file: &'d std::fs::File,
    since_sync: u64,
    step: u64,
    signal: std::sync::mpsc::SyncSender<()>,
}

impl Write for StreamingFile<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let mut file = self.file;
        let written = file.write(bytes)?;
        self.since_sync = self.since_sync.saturating_add(written as u64);
        if self.since_sync >= self.step {
            self.since_sync = 0;
            // Full: a sync is running and another is queued, which will cover these bytes.
            // Disconnected: the thread stopped on an error, which the commit reports.
            let _ = self.signal.try_send(());
        }
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let mut file = self.file;
        file.flush()
    }
}

impl Destination {
    /// Checks `given` against the output rules and creates its temporary file. `inputs` are
    /// the files the command reads; `may_replace_input` lifts rule 3, and
    /// `overwrite_flag` names the flag that does so in the refusal (None when there is none).
    pub fn open(
        given: &Path,
        inputs: &[&Path],
        may_replace_input: bool,
        overwrite_flag: Option<&str>,
    ) -> Result<Destination, DestinationError> {
        let refuse = |reason: String| DestinationError::Refused {
            file: given.to_path_buf(),
            reason,
        };
        let io = |source: std::io::Error| DestinationError::Io {
            file: given.to_path_buf(),
            source,
        };
        let target = match std::fs::symlink_metadata(given) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => given.to_path_buf(),
            Err(error) => return Err(io(error)),
            Ok(meta) if meta.file_type().is_symlink() => match std::fs::canonicalize(given) {
                Ok(target) => target,
                Err(_) => {
                    return Err(refuse(
                        "is a symbolic link to a file that does not exist; jointplan replaces \
                         the file a link points to, never the link: create the target, or \
                         name a plain path"
                            .to_owned(),
                    ))
                }
            },
            Ok(_) => given.to_path_buf(),
        };
        let existing = match std::fs::metadata(&target) {
            Ok(meta) => Some(meta),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(io(error)),
        };
        if let Some(meta) = &existing {
            if !meta.is_file() {
                return Err(refuse(format!(
                    "is {}, not a regular file; jointplan writes files atomically (a \
                     temporary file renamed over the destination), which would replace it: \
                     leave out `-o` to print to standard output, or name a regular file",
                    describe_kind(meta)
                )));
            }
            if !may_replace_input {
                for input in inputs {
                    if same_file(meta, &target, input) {
                        let how = match overwrite_flag {
                            Some(flag) => format!("pass {flag} to replace it"),
                            None => "write somewhere else".to_owned(),
                        };
                        return Err(refuse(format!(
                            "is the input {}; refusing to overwrite an input: {how}",
                            input.display()
                        )));
                    }
                }
            }
        }
        let directory = match target.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = target
            .file_name()
            .ok_or_else(|| refuse("names no file".to_owned()))?
            .to_string_lossy()
            .into_owned();
        let mut builder = tempfile::Builder::new();
        let prefix = format!("{name}{PARTIAL_MARKER}");
        builder.prefix(&prefix).rand_bytes(6);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = existing
                .as_ref()
                .map_or(0o666, |meta| meta.permissions().mode() & 0o7777);
            builder.permissions(std::fs::Permissions::from_mode(mode));
        }
        let temporary = builder.tempfile_in(&directory).map_err(io)?;
        pending().insert(temporary.path().to_path_buf());
        Ok(Destination {
            given: given.to_path_buf(),
            target,
            temporary: Some(temporary),
            background_sync: Mutex::new(None),
            synced: None,
        })
    }

    /// The path as the user gave it.
    pub fn path(&self) -> &Path {
        &self.given
    }

    /// Writes `bytes` and renames the file into place.
    pub fn write_bytes(mut self, bytes: &[u8]) -> Result<(), DestinationError> {
        if let Some(temporary) = self.temporary.as_mut() {
            temporary
                .write_all(bytes)
                .map_err(|source| DestinationError::Io {
                    file: self.given.clone(),
                    source,
                })?;
        }
        self.commit()
    }

    /// Writes `value` as JSON (pretty, with a final newline, or compact), streamed through
    /// a buffered writer (a large plan is never held in memory as text), and renames it
    /// into place.
    pub fn write_json<T: Serialize>(self, value: &T, pretty: bool) -> Result<(), DestinationError> {
        let io = |source: std::io::Error| DestinationError::Io {
            file: self.given.clone(),
            source,
        };
        // Through the write-behind writer: a request of 100 MB is mostly on disk when the
        // last byte is serialized, so the sync before the rename has only the tail left.
        if let Some(streaming) = self.streaming_writer()? {
            let mut writer = std::io::BufWriter::with_capacity(1 << 20, streaming);
            let written = if pretty {
                serde_json::to_writer_pretty(&mut writer, value)
            } else {
                serde_json::to_writer(&mut writer, value)
            };
            written.map_err(|e| io(std::io::Error::other(format!("cannot serialize: {e}"))))?;
            if pretty {
                writer.write_all(b"\n").map_err(io)?;
            }
            writer.flush().map_err(io)?;
        }
        self.commit()
    }

    /// A writer into the temporary file, for a caller that streams into it itself and then
    /// calls [`Destination::commit_written`]; `None` once renamed into place (or when a
    /// second handle on the file cannot be opened: the error is returned then).
    ///
    /// Every [`WRITE_BEHIND_STEP`] bytes the writer asks a thread of its own to sync what
    /// has been written so far, and goes on writing: the disk works while the caller
    /// computes, and the sync before the rename has only the tail left. On a 932 MB plan the
    /// one sync at the end was about 1.7 s of the command's wall time, every core idle.
    pub fn streaming_writer(&self) -> Result<Option<StreamingFile<'_>>, DestinationError> {
        self.streaming_writer_every(WRITE_BEHIND_STEP)
    }

    /// [`Destination::streaming_writer`] with a sync requested every `step` bytes.
    fn streaming_writer_every(
        &self,
        step: u64,
    ) -> Result<Option<StreamingFile<'_>>, DestinationError> {
        let Some(temporary) = &self.temporary else {
            return Ok(None);
        };
        let file = temporary.as_file();
        let syncing = file.try_clone().map_err(|source| DestinationError::Io {
            file: self.given.clone(),
            source,
        })?;
        let (signal, requests) = std::sync::mpsc::sync_channel::<()>(1);
        let thread = std::thread::spawn(move || -> std::io::Result<u64> {
            // Requests that arrive while a sync runs are coalesced by the channel's room of
            // one: the next sync covers them.
            let mut syncs = 0;
            for () in requests {
                syncing.sync_data()?;
                syncs += 1;
            }
            Ok(syncs)
        });
        let mut background = self
            .background_sync
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(previous) = background.replace(thread) {
            // A second writer on one destination: the first one's thread is joined now.
            let _ = previous.join();
        }
        Ok(Some(StreamingFile {
            file,
            since_sync: 0,
            step,
            signal,
        }))
    }

    /// Renames the temporary file, written by the caller through
    /// [`Destination::temporary_file`], into place, after syncing it. `written` is the
    /// outcome of that write: an error is reported as this destination's, and the temporary
    /// file is removed instead.
    pub fn commit_written(self, written: std::io::Result<()>) -> Result<(), DestinationError> {
        match written {
            Ok(()) => self.commit(),
            Err(source) => Err(DestinationError::Io {
                file: self.given.clone(),
                source,
            }),
        }
    }

    /// Makes what was written to the temporary file durable (the write-behind syncs
    /// waited for, then one sync of the rest), without renaming it into place: the slow
    /// half of the commit, which `plan` runs beside its report on the plan. The commit
    /// that follows reports this outcome and does not sync again.
    pub fn sync(&mut self) {
        if self.synced.is_none() && self.temporary.is_some() {
            self.synced = Some(self.sync_now());
        }
    }

    fn sync_now(&mut self) -> Result<(), DestinationError> {
        let Some(temporary) = &self.temporary else {
            return Ok(());
        };
        let io = |source: std::io::Error| DestinationError::Io {
            file: self.given.clone(),
            source,
        };
        let background = self
            .background_sync
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        // The write-behind syncs end when their writer is dropped; the last one is waited
        // for, and its failure is this destination's failure.
        match background.map(std::thread::JoinHandle::join) {
            None | Some(Ok(Ok(_))) => {}
            Some(Ok(Err(error))) => return Err(io(error)),
            Some(Err(_)) => {
                return Err(io(std::io::Error::other(
                    "the thread syncing the file in the background stopped",
                )))
            }
        }
        temporary.as_file().sync_all().map_err(io)
    }

    fn commit(mut self) -> Result<(), DestinationError> {
        let synced = match self.synced.take() {
            Some(synced) => synced,
            None => self.sync_now(),
        };
        let Some(temporary) = self.temporary.take() else {
            return Ok(());
        };
        let temporary_path = temporary.path().to_path_buf();
        let result = synced.and_then(|()| {
            temporary
                .persist(&self.target)
                .map(drop)
                .map_err(|e| DestinationError::Io {
                    file: self.given.clone(),
                    source: e.error,
                })
        });
        pending().remove(&temporary_path);
        result
    }
}

impl Drop for Destination {
    fn drop(&mut self) {
        // An unwritten temporary file removes itself when dropped; forget it here too.
        if let Some(temporary) = &self.temporary {
            pending().remove(temporary.path());
        }
    }
}

fn describe_kind(meta: &std::fs::Metadata) -> &'static str {
    if meta.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    "not a regular file"
}

/// Whether `input` (through links) is the file `target` described by `meta`.
fn same_file(meta: &std::fs::Metadata, target: &Path, input: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let _ = target;
        std::fs::metadata(input)
            .is_ok_and(|input| meta.dev() == input.dev() && meta.ino() == input.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        match (std::fs::canonicalize(target), std::fs::canonicalize(input)) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(file: &Path, bytes: &[u8]) -> Result<(), DestinationError> {
        Destination::open(file, &[], false, None)?.write_bytes(bytes)
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn streamed_json_is_the_pretty_text() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("value.json");
        let value = serde_json::json!({"b": [1, 2], "a": {"c": null}});
        Destination::open(&file, &[], false, None)
            .unwrap()
            .write_json(&value, true)
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            super::super::output::pretty_json(&value).unwrap()
        );
        assert_eq!(entries(dir.path()), ["value.json"]);
    }

    #[test]
    fn a_streamed_file_is_synced_behind_its_writer_and_committed_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plan.json");
        let destination = Destination::open(&file, &[], false, None).unwrap();
        let bytes: Vec<u8> = (0..4000u32).map(|i| b'a' + (i % 26) as u8).collect();
        {
            let mut writer = destination.streaming_writer_every(100).unwrap().unwrap();
            for chunk in bytes.chunks(37) {
                writer.write_all(chunk).unwrap();
            }
            writer.flush().unwrap();
        }
        // The writer is dropped: the thread ends after the syncs it was asked for.
        let thread = destination.background_sync.lock().unwrap().take().unwrap();
        let syncs = thread.join().unwrap().unwrap();
        assert!((1..=40).contains(&syncs), "{syncs} syncs");
        destination.commit_written(Ok(())).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), bytes);
        assert_eq!(entries(dir.path()), ["plan.json"]);
        // A second streamed write over the first, its thread joined by the commit itself.
        let destination = Destination::open(&file, &[], false, None).unwrap();
        let mut writer = destination.streaming_writer_every(10).unwrap().unwrap();
        writer.write_all(b"[1, 2, 3]\n").unwrap();
        drop(writer);
        destination.commit_written(Ok(())).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"[1, 2, 3]\n");
        assert_eq!(entries(dir.path()), ["plan.json"]);
        // Synced before the commit (as `plan` does beside its report): nothing is renamed
        // by the sync, and the commit renames without waiting again.
        let mut destination = Destination::open(&file, &[], false, None).unwrap();
        let mut writer = destination.streaming_writer_every(10).unwrap().unwrap();
        writer.write_all(b"[4]\n").unwrap();
        drop(writer);
        destination.sync();
        assert!(matches!(destination.synced, Some(Ok(()))));
        assert!(destination.background_sync.lock().unwrap().is_none());
        assert_eq!(std::fs::read(&file).unwrap(), b"[1, 2, 3]\n");
        destination.commit_written(Ok(())).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"[4]\n");
        assert_eq!(entries(dir.path()), ["plan.json"]);
    }

    #[test]
    fn outputs_get_the_permissions_of_a_plain_create_and_keep_a_replaced_files() {
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("plain.json");
        std::fs::File::create(&plain).unwrap();
        let atomic = dir.path().join("atomic.json");
        write(&atomic, b"[1]").unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions();
        assert_eq!(mode(&atomic), mode(&plain));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&atomic, std::fs::Permissions::from_mode(0o600)).unwrap();
            write(&atomic, b"[2]").unwrap();
            assert_eq!(mode(&atomic).mode() & 0o777, 0o600);
        }
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plan.json");
        write(&file, b"one").unwrap();
        write(&file, b"two").unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"two");
        assert_eq!(entries(dir.path()), ["plan.json"]);
        let missing = dir.path().join("no-such-dir").join("plan.json");
        assert!(write(&missing, b"x").is_err());
        assert!(!missing.exists());
    }

    #[test]
    fn the_temporary_file_is_named_after_its_destination_and_removed_unwritten() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plan.json");
        let destination = Destination::open(&file, &[], false, None).unwrap();
        let names = entries(dir.path());
        assert_eq!(names.len(), 1);
        assert!(
            names[0].starts_with("plan.json.jointplan-partial-"),
            "{names:?}"
        );
        assert!(pending().iter().any(|p| p.starts_with(dir.path())));
        drop(destination);
        assert!(entries(dir.path()).is_empty());
        assert!(!pending().iter().any(|p| p.starts_with(dir.path())));
    }

    #[cfg(unix)]
    #[test]
    fn a_symbolic_link_is_followed_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        std::fs::write(&target, b"old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink(dir.path().join("nowhere.json"), &dangling).unwrap();
        let err = write(&dangling, b"x").unwrap_err().to_string();
        assert!(
            err.contains("symbolic link to a file that does not exist"),
            "{err}"
        );
        assert!(!dir.path().join("nowhere.json").exists());
    }

    #[cfg(unix)]
    #[test]
    fn special_files_are_refused() {
        use std::os::unix::fs::FileTypeExt;
        let err = write(Path::new("/dev/null"), b"x").unwrap_err().to_string();
        assert!(err.contains("a character device"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let err = write(dir.path(), b"x").unwrap_err().to_string();
        assert!(err.contains("a directory"), "{err}");
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            let err = write(&fifo, b"x").unwrap_err().to_string();
            assert!(err.contains("FIFO"), "{err}");
            assert!(std::fs::symlink_metadata(&fifo)
                .unwrap()
                .file_type()
                .is_fifo());
        }
    }

    #[test]
    fn an_input_is_not_replaced_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("request.json");
        std::fs::write(&input, b"request").unwrap();
        let err = Destination::open(&input, &[&input], false, Some("--overwrite-input"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("refusing to overwrite an input"), "{err}");
        assert!(err.contains("--overwrite-input"), "{err}");
        #[cfg(unix)]
        {
            let link = dir.path().join("link.json");
            std::os::unix::fs::symlink(&input, &link).unwrap();
            assert!(Destination::open(&link, &[&input], false, None).is_err());
        }
        Destination::open(&input, &[&input], true, None)
            .unwrap()
            .write_bytes(b"plan")
            .unwrap();
        assert_eq!(std::fs::read(&input).unwrap(), b"plan");
    }
}
