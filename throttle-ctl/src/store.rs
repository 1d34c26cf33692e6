//! The results store: one SQLite database (WAL mode), one row per run with every factor.
//!
//! Failed runs are stored too (status `failed` and the reason), so a sweep can retry them
//! up to a limit and the analysis can say how many it left out. Rows are never updated or
//! deleted by throttle; a retry is a new row. The store knows rows and nothing of what is
//! computed from them (`measurements` turns rows into the analysis's input).
//!
//! Schema versions (SQLite's `user_version`): 0, the first, had no traffic or load
//! columns; 1 adds them; 2 adds each run's workload metrics and the `link_params` table
//! (LogGPS parameters measured through the agents, `model loggps --db`); 3 adds each run's
//! fidelity (`fidelity`: the proof that its links ran at their setting, and `flag`: why
//! not, when not); 4 adds each run's problem value and latency step; 5 the share of
//! the cores the run's own processes used (`cpu_own`). Opening an older store adds the
//! new columns (NULL in old rows) and nothing is rewritten; a store from a newer throttle is refused, not guessed at.
//!
//! Each run's output (a command's whole output, up to [`crate::external`]'s cap; rank 0's
//! last lines for a built-in workload) is kept in a table of its own, `outputs`, keyed by
//! the run's row: the `runs` rows stay small for the analysis, and a store without the
//! table (an older throttle's) gets it when opened, with no change to its version.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};
use rusqlite::{params, Connection, OptionalExtension};
use throttle_analysis::models::loggps::LinkMeasurement;
use throttle_proto::Pct;

use crate::run_status::RunStatus;

pub const DEFAULT_DB: &str = "throttle-results.db";

/// One run, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct RunRow {
    pub point_key: String,
    pub series: String,
    pub workload: String,
    /// Workload options as JSON.
    pub options: String,
    pub nodes: u32,
    pub ranks_per_node: u32,
    pub procs: u32,
    pub bw_pct: Pct,
    pub capacity: f64,
    pub latency_us: u64,
    pub repeat: u32,
    pub started_at: String,
    pub seconds: Option<f64>,
    pub kernel_seconds: Option<f64>,
    pub teps: Option<f64>,
    pub status: RunStatus,
    pub reason: Option<String>,
    pub host: String,
    pub version: String,
    pub job: String,
    /// Bytes the run's nodes sent and received through their agents (the agents'
    /// counters read before and after the run; other traffic in between counts too).
    pub bytes_sent: Option<u64>,
    pub bytes_received: Option<u64>,
    /// CPU busy share of the machine just before the run (the settle pause), and the
    /// share stolen by the hypervisor during it, 0..1 (from /proc/stat of the controller).
    pub cpu_busy_before: Option<f64>,
    pub cpu_steal: Option<f64>,
    /// The share of this machine's cores, 0..1, that the run's own processes used over
    /// the run (a local cluster's agents with their ranks, and a command's processes:
    /// `load::own_cpu_seconds`); `None` for a remote cluster and in older stores. A size
    /// whose runs kept the cores busy is CPU-bound, and the analysis says so.
    pub cpu_own: Option<f64>,
    /// The workload's own metrics (rank 0's result line), a JSON object: what the
    /// analytic models need beyond the time (PMM's compute seconds, a master/worker
    /// run's task counts).
    pub metrics: Option<String>,
    /// The run's fidelity (`fidelity::RunFidelity`, JSON), when every agent was read.
    pub fidelity: Option<String>,
    /// Why the run's links did not run at their setting; `None` when they did or when it
    /// is not known. A flagged run is left out of the analysis and retried by a sweep.
    pub flag: Option<String>,
    /// The problem value of a sweep with a problem axis (`[problem]`: a BFS scale, a
    /// matrix order, bytes, a command's `{n}`); `None` without one (and in older stores).
    pub problem: Option<f64>,
    /// The added one-way latency of a sweep's latency point (`latencies`), us; `None`
    /// for a bandwidth point (whose link latency is `latency_us`) and in older stores.
    pub latency_step: Option<u64>,
}

const LINK_COLUMNS: &str = "measured_at, host, version, job, procs, bw_pct, capacity, latency, send_overhead, recv_overhead, gap, gap_per_byte, send_per_byte, recv_per_byte, master_send_overhead, master_recv_overhead, detail";

/// The largest cell a stored run may hold (bytes).
const MAX_CELL: i64 = 1 << 20;

/// The schema this build writes.
pub const SCHEMA_VERSION: i64 = 5;

/// Columns added after version 0, with their types: (version that added it, name, type).
const ADDED: [(i64, &str, &str); 10] = [
    (1, "bytes_sent", "INTEGER"),
    (1, "bytes_received", "INTEGER"),
    (1, "cpu_busy_before", "REAL"),
    (1, "cpu_steal", "REAL"),
    (2, "metrics", "TEXT"),
    (3, "fidelity", "TEXT"),
    (3, "flag", "TEXT"),
    (4, "problem", "REAL"),
    (4, "latency_step", "INTEGER"),
    (5, "cpu_own", "REAL"),
];

pub struct Store {
    conn: Connection,
    /// The `runs` columns to select, in [`COLUMNS`]' order: [`COLUMNS`] itself for a store
    /// opened to write (brought to this schema), `NULL` for the ones an older store read
    /// as it is lacks.
    select: String,
    /// Whether the store has the LogGPS and outputs tables (an older one read as it is
    /// may not).
    links: bool,
    outputs: bool,
}

/// The columns of the first schema: a table named `runs` without them is not ours.
const FIRST_COLUMNS: [&str; 20] = [
    "point_key",
    "series",
    "workload",
    "options",
    "nodes",
    "ranks_per_node",
    "procs",
    "bw_pct",
    "capacity",
    "latency_us",
    "repeat",
    "started_at",
    "seconds",
    "kernel_seconds",
    "teps",
    "status",
    "reason",
    "host",
    "version",
    "job",
];

const COLUMNS: &str = "point_key, series, workload, options, nodes, ranks_per_node, procs, bw_pct, capacity, latency_us, repeat, started_at, seconds, kernel_seconds, teps, status, reason, host, version, job, bytes_sent, bytes_received, cpu_busy_before, cpu_steal, metrics, fidelity, flag, problem, latency_step, cpu_own";

/// Refuse a results database where another user could choose what it reads or writes:
/// a symbolic link as the database (SQLite follows one there unless told not to, and then
/// creates the file where the link points: measured with a link in `/tmp`) or as one of
/// the journal files beside it (`-wal`, `-shm`, `-journal`); anything but a regular file
/// there (a FIFO would block the open for ever, a directory gives "disk I/O error"); to
/// write, a directory of another user's (not root's); a
/// journal file that is not the database owner's (SQLite reads another user's `-wal` as
/// the store's own rows: issue 43), or, to write, not this user's; a directory others may
/// write that is not sticky (they could rename the database away and put theirs in its
/// place); and, to write, any directory others may write, sticky or not (between this
/// check and SQLite's open another user could still create a journal file of theirs
/// there, which SQLite would then use). Returns whether a writer's journal files are there
/// (a `-wal` or `-shm`), and the database's path as the checked directory's descriptor
/// resolved it: the directory is walked one component at a time, a link on the way
/// followed only where `shared_dir::Dir::resolve` trusts it (another user's link, or one
/// in a directory others may change, is refused: issue 55), and SQLite is given the path
/// the walk arrived at, not one that may pass through a link.
fn check_place(path: &Path, writing: bool) -> Result<(bool, PathBuf)> {
    use std::os::unix::fs::MetadataExt;
    let me = nix::unistd::geteuid().as_raw();
    let name = path.file_name().ok_or_else(|| {
        anyhow!(
            "{} names no file: name the results database file with --db",
            path.display()
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let checked = crate::shared_dir::Dir::resolve(&dir, None)
        .with_context(|| format!("the results database {}", path.display()))?;
    let path = &checked.real_path()?.join(name);
    let db = std::fs::symlink_metadata(path).ok();
    let owner = db.as_ref().map_or(me, |m| m.uid());
    let mut writer_open = false;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let p = side_file(path, suffix);
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.file_type().is_symlink() {
            bail!(
                "{} is a symbolic link: the results database and its journal files are opened only as themselves; name the real file with --db",
                p.display()
            );
        }
        if !m.file_type().is_file() {
            bail!(
                "{} is not a regular file (a directory, a FIFO or a device): name the results database file with --db",
                p.display()
            );
        }
        if suffix.is_empty() {
            continue;
        }
        if m.uid() != owner || (writing && m.uid() != me) {
            bail!(
                "{} belongs to uid {}, not to {} (uid {}): another user may have put it there to change what the store holds; remove it if it is not yours",
                p.display(),
                m.uid(),
                if m.uid() != owner { "the owner of the database" } else { "you" },
                if m.uid() != owner { owner } else { me }
            );
        }
        writer_open |= suffix != "-journal";
    }
    {
        let m = checked.stat()?;
        let others_write = m.st_mode & 0o022 != 0;
        let sticky = m.st_mode & 0o1000 != 0;
        if writing && m.st_uid != me && m.st_uid != 0 {
            bail!(
                "the results database {} is in {}, a directory of uid {} (not yours): its owner could put a journal file of theirs beside it for SQLite to use; keep it in a directory of your own",
                path.display(),
                dir.display(),
                m.st_uid
            );
        }
        if others_write && (writing || !sticky) {
            bail!(
                "the results database {} is in {}, which other users may write (mode {:o}{}): they could {}; keep it in a directory of your own",
                path.display(),
                dir.display(),
                m.st_mode & 0o7777,
                if sticky { ", sticky" } else { ", not sticky" },
                if sticky {
                    "put a journal file of theirs beside it for SQLite to use"
                } else {
                    "put another database in its place"
                }
            );
        }
    }
    Ok((writer_open, path.clone()))
}

impl Store {
    /// Open (or create) the database at `path`.
    pub fn open(path: &Path) -> Result<Store> {
        let (_, real) = check_place(path, true)?;
        let conn = Connection::open_with_flags(
            &real,
            rusqlite::OpenFlags::default() | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .with_context(|| format!("cannot open the results database {}", path.display()))?;
        conn.pragma_update(None, "journal_mode", "WAL")
            .with_context(|| format!("{} is not a throttle results database", path.display()))?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS runs (
                id INTEGER PRIMARY KEY,
                point_key TEXT NOT NULL,
                series TEXT NOT NULL,
                workload TEXT NOT NULL,
                options TEXT NOT NULL,
                nodes INTEGER NOT NULL,
                ranks_per_node INTEGER NOT NULL,
                procs INTEGER NOT NULL,
                bw_pct REAL,
                capacity REAL NOT NULL,
                latency_us INTEGER NOT NULL,
                repeat INTEGER NOT NULL,
                started_at TEXT NOT NULL,
                seconds REAL,
                kernel_seconds REAL,
                teps REAL,
                status TEXT NOT NULL,
                reason TEXT,
                host TEXT NOT NULL,
                version TEXT NOT NULL,
                job TEXT NOT NULL
            );
            CREATE INDEX IF NOT EXISTS runs_point ON runs(point_key, status);
            CREATE TABLE IF NOT EXISTS link_params (
                id INTEGER PRIMARY KEY,
                measured_at TEXT NOT NULL,
                host TEXT NOT NULL,
                version TEXT NOT NULL,
                job TEXT NOT NULL,
                procs INTEGER NOT NULL,
                bw_pct REAL,
                capacity REAL NOT NULL,
                latency REAL NOT NULL,
                send_overhead REAL NOT NULL,
                recv_overhead REAL NOT NULL,
                gap REAL NOT NULL,
                gap_per_byte REAL NOT NULL,
                send_per_byte REAL NOT NULL,
                recv_per_byte REAL NOT NULL,
                master_send_overhead REAL NOT NULL,
                master_recv_overhead REAL NOT NULL,
                detail TEXT NOT NULL
            );
            CREATE TABLE IF NOT EXISTS outputs (
                run_id INTEGER PRIMARY KEY,
                text TEXT NOT NULL
            );
            CREATE TABLE IF NOT EXISTS levels (
                series TEXT PRIMARY KEY,
                levels TEXT NOT NULL
            );",
        )
        .with_context(|| format!("{} is not a throttle results database", path.display()))?;
        migrate(&conn).with_context(|| format!("cannot open {}", path.display()))?;
        Ok(Store {
            conn,
            select: COLUMNS.to_string(),
            links: true,
            outputs: true,
        })
    }

    /// Open the database at `path` to read it only, for the commands that read (analyze,
    /// export, output, the models): nothing is created, migrated or written, so a file is
    /// left as it was found; a file that is not a throttle results database (another
    /// program's SQLite file, an empty file, anything else) is refused by name. An older
    /// store is read as it is (the columns it lacks read as empty). A store no writer has
    /// open is read as immutable (no lock): a sweep that opens it and checkpoints during
    /// the read could change what is read, a window of milliseconds this accepts.
    pub fn read(path: &Path) -> Result<Store> {
        // A store no writer has open (no `-wal` or `-shm` beside it) is read as an
        // immutable file: a read-only connection to a WAL store would otherwise create
        // both (and leave them). One a sweep is writing is read as SQLite's readers read:
        // its side files exist already (and are its owner's: checked).
        let (writer_open, real) = check_place(path, false)?;
        let not_ours = || {
            anyhow!(
                "{} is not a throttle results database (no `runs` table of throttle's in it): name the file a sweep or the demo wrote with --db",
                path.display()
            )
        };
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_NOFOLLOW
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
            | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let uri = format!(
            "file:{}{}",
            uri_path(&real),
            if writer_open { "" } else { "?immutable=1" }
        );
        let conn = Connection::open_with_flags(uri, flags)
            .with_context(|| format!("cannot open the results database {}", path.display()))?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        let names = |sql: &str| -> rusqlite::Result<HashSet<String>> {
            let mut st = conn.prepare(sql)?;
            let names = st.query_map([], |r| r.get::<_, String>(0))?;
            names.collect()
        };
        // Another file than SQLite's fails here ("file is not a database"); any other
        // failure (permissions, a journal it cannot read) is said as SQLite says it.
        let failed = |e: rusqlite::Error| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::NotADatabase) => not_ours(),
            _ => anyhow::Error::new(e).context(format!(
                "cannot read the results database {}",
                path.display()
            )),
        };
        let tables =
            names("SELECT name FROM sqlite_master WHERE type = 'table'").map_err(failed)?;
        if !tables.contains("runs") {
            return Err(not_ours());
        }
        let have = names("SELECT name FROM pragma_table_info('runs')").map_err(failed)?;
        if FIRST_COLUMNS.iter().any(|c| !have.contains(*c)) {
            return Err(not_ours());
        }
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        check_version(version).with_context(|| format!("cannot read {}", path.display()))?;
        let select = COLUMNS
            .split(", ")
            .map(|c| {
                if have.contains(c) {
                    c.to_string()
                } else {
                    format!("NULL AS {c}")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        Ok(Store {
            links: tables.contains("link_params"),
            outputs: tables.contains("outputs"),
            conn,
            select,
        })
    }

    pub fn insert(&self, r: &RunRow) -> Result<()> {
        self.insert_row(r).map(|_| ())
    }

    /// Store a run and its output (lines, joined), together or not at all.
    pub fn insert_with_output(&self, r: &RunRow, output: &[String]) -> Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        let id = self.insert_row(r)?;
        // A row id SQLite reuses (newest rows deleted by hand) or an `outputs` row put
        // there by someone else must not become this run's output, nor block its own.
        self.conn
            .execute("DELETE FROM outputs WHERE run_id = ?1", params![id])?;
        if !output.is_empty() {
            let mut text = output.join("\n");
            text.push('\n');
            self.conn.execute(
                "INSERT INTO outputs (run_id, text) VALUES (?1, ?2)",
                params![id, text],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The stored output of each run of job `job` (a retry is a run of its own job; a
    /// name matches one run unless a store was merged by hand), oldest first.
    pub fn outputs_of(&self, job: &str) -> Result<Vec<String>> {
        if !self.outputs {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare(
            // Cut at the cell bound: a crafted store's output is not read whole.
            &format!("SELECT substr(o.text, 1, {MAX_CELL}) FROM runs r JOIN outputs o ON o.run_id = r.id WHERE r.job = ?1 ORDER BY r.id"),
        )?;
        let rows = st.query_map([job], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether any run of series `series` is stored.
    pub fn has_series(&self, series: &str) -> Result<bool> {
        Ok(self.conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM runs WHERE series = ?1)",
            [series],
            |r| r.get::<_, bool>(0),
        )?)
    }

    /// The (workload, options) of the stored runs of series `series` at problem value
    /// `problem` (none: runs without one), each once.
    pub fn settings_of(&self, series: &str, problem: Option<u64>) -> Result<Vec<(String, String)>> {
        let mut st = self.conn.prepare(
            "SELECT DISTINCT workload, options FROM runs WHERE series = ?1 AND problem IS ?2",
        )?;
        let rows = st.query_map(params![series, problem.map(|n| n as f64)], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether runs of series `series` are stored with a problem value, and without one.
    pub fn problem_kinds(&self, series: &str) -> Result<(bool, bool)> {
        let count = |sql: &str| -> Result<bool> {
            Ok(self.conn.query_row(sql, [series], |r| r.get::<_, i64>(0))? > 0)
        };
        Ok((
            count("SELECT COUNT(*) FROM runs WHERE series = ?1 AND problem IS NOT NULL")?,
            count("SELECT COUNT(*) FROM runs WHERE series = ?1 AND problem IS NULL")?,
        ))
    }

    /// Whether a run of job `job` is stored (with or without an output).
    pub fn has_job(&self, job: &str) -> Result<bool> {
        Ok(self
            .conn
            .query_row("SELECT COUNT(*) FROM runs WHERE job = ?1", [job], |r| {
                r.get::<_, i64>(0)
            })?
            > 0)
    }

    fn insert_row(&self, r: &RunRow) -> Result<i64> {
        self.conn.execute(
            &format!("INSERT INTO runs ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30)"),
            params![
                r.point_key, r.series, r.workload, r.options, r.nodes, r.ranks_per_node, r.procs,
                r.bw_pct.percent(), r.capacity, r.latency_us as i64, r.repeat, r.started_at, r.seconds,
                r.kernel_seconds, r.teps, r.status.as_str(), r.reason, r.host, r.version, r.job,
                r.bytes_sent.map(|b| b as i64), r.bytes_received.map(|b| b as i64),
                r.cpu_busy_before, r.cpu_steal, r.metrics, r.fidelity, r.flag, r.problem,
                r.latency_step.map(|l| l as i64), r.cpu_own
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Points with a successful run that was not flagged.
    pub fn done_points(&self) -> Result<HashSet<String>> {
        let mut st = self
            .conn
            .prepare("SELECT DISTINCT point_key FROM runs WHERE status = 'ok' AND flag IS NULL")?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Failed (or flagged) attempts per point.
    pub fn failed_attempts(&self) -> Result<HashMap<String, u32>> {
        let mut st = self.conn.prepare(
            "SELECT point_key, COUNT(*) FROM runs WHERE status != 'ok' OR flag IS NOT NULL GROUP BY point_key",
        )?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn rows(&self) -> Result<Vec<RunRow>> {
        // No cell larger than a run writes (a command's reason, a fidelity proof of many
        // nodes: kilobytes): a crafted store's 30 MB cells took 2.8 GB to read.
        let big: Option<(i64, i64)> = self
            .conn
            .query_row(
                &format!(
                    "SELECT id, n FROM (SELECT id, MAX({}) AS n FROM runs) WHERE n > {MAX_CELL} LIMIT 1",
                    self.select
                        .split(", ")
                        // "NULL AS x" for a column an older store lacks.
                        .map(|c| c.split(" AS ").next().unwrap_or(c))
                        .map(|c| format!("COALESCE(length(CAST({c} AS BLOB)), 0)"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if let Some((id, n)) = big {
            bail!(
                "row {id} of the runs holds a cell of {n} bytes, more than a run writes (at most {MAX_CELL}): this store was not written by throttle as it is; refused"
            );
        }
        let mut st = self
            .conn
            .prepare(&format!("SELECT {}, id FROM runs ORDER BY id", self.select))?;
        let rows = st.query_map([], |r| {
            let id: i64 = r.get(30)?;
            Ok(RunRow {
                point_key: r.get(0)?,
                series: r.get(1)?,
                workload: r.get(2)?,
                options: r.get(3)?,
                nodes: r.get(4)?,
                ranks_per_node: r.get(5)?,
                procs: r.get(6)?,
                bw_pct: pct_column(r, 7, "runs", id)?,
                capacity: r.get(8)?,
                latency_us: r.get::<_, i64>(9)? as u64,
                repeat: r.get(10)?,
                started_at: r.get(11)?,
                seconds: r.get(12)?,
                kernel_seconds: r.get(13)?,
                teps: r.get(14)?,
                status: status_column(r.get(15)?),
                reason: r.get(16)?,
                host: r.get(17)?,
                version: r.get(18)?,
                job: r.get(19)?,
                bytes_sent: r.get::<_, Option<i64>>(20)?.map(|b| b.max(0) as u64),
                bytes_received: r.get::<_, Option<i64>>(21)?.map(|b| b.max(0) as u64),
                cpu_busy_before: r.get(22)?,
                cpu_steal: r.get(23)?,
                metrics: r.get(24)?,
                fidelity: r.get(25)?,
                flag: r.get(26)?,
                problem: r.get(27)?,
                // A negative step is none a sweep writes: kept out of range, so that the
                // analysis refuses it rather than taking it for a baseline.
                latency_step: r
                    .get::<_, Option<i64>>(28)?
                    .map(|l| u64::try_from(l).unwrap_or(u64::MAX)),
                cpu_own: r.get(29)?,
            })
        })?;
        rows.collect::<Result<_, _>>().map_err(refused_row)
    }

    pub fn insert_link(&self, r: &LinkMeasurement) -> Result<()> {
        self.conn.execute(
            &format!("INSERT INTO link_params ({LINK_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)"),
            params![
                r.measured_at, r.host, r.version, r.job, r.procs, r.bw_pct.percent(), r.capacity,
                r.latency, r.send_overhead, r.recv_overhead, r.gap, r.gap_per_byte,
                r.send_per_byte, r.recv_per_byte, r.master_send_overhead,
                r.master_recv_overhead, r.detail
            ],
        )?;
        Ok(())
    }

    /// Every stored LogGPS measurement, oldest first.
    pub fn links(&self) -> Result<Vec<LinkMeasurement>> {
        if !self.links {
            return Ok(Vec::new());
        }
        let mut st = self.conn.prepare(&format!(
            "SELECT {}, id FROM link_params ORDER BY id",
            // The one text cell a LogGPS row may make long, cut at the cell bound.
            LINK_COLUMNS.replace("detail", &format!("substr(detail, 1, {MAX_CELL})"))
        ))?;
        let rows = st.query_map([], |r| {
            let id: i64 = r.get(17)?;
            Ok(LinkMeasurement {
                measured_at: r.get(0)?,
                host: r.get(1)?,
                version: r.get(2)?,
                job: r.get(3)?,
                procs: r.get(4)?,
                bw_pct: pct_column(r, 5, "link_params", id)?,
                capacity: r.get(6)?,
                latency: r.get(7)?,
                send_overhead: r.get(8)?,
                recv_overhead: r.get(9)?,
                gap: r.get(10)?,
                gap_per_byte: r.get(11)?,
                send_per_byte: r.get(12)?,
                recv_per_byte: r.get(13)?,
                master_send_overhead: r.get(14)?,
                master_recv_overhead: r.get(15)?,
                detail: r.get(16)?,
            })
        })?;
        rows.collect::<Result<_, _>>().map_err(refused_row)
    }

    /// Link capacity of the stored runs, if they agree.
    pub fn capacity(&self) -> Result<Option<f64>> {
        let mut st = self.conn.prepare("SELECT DISTINCT capacity FROM runs")?;
        let caps: Vec<f64> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        Ok((caps.len() == 1).then(|| caps[0]))
    }

    /// Record the CTI levels a sweep of `series` measures closely (its `[search]` or
    /// `[until]` levels): `analyze`'s default levels for it.
    pub fn set_levels(&self, series: &str, levels: &[f64]) -> Result<()> {
        let text: Vec<String> = levels.iter().map(f64::to_string).collect();
        self.conn.execute(
            "INSERT INTO levels (series, levels) VALUES (?1, ?2)
             ON CONFLICT(series) DO UPDATE SET levels = excluded.levels",
            [series, &text.join(",")],
        )?;
        Ok(())
    }

    /// The CTI levels recorded for `series` ([`Store::set_levels`]); `None` in a store
    /// without them (an older one, or a sweep without `[search]`), or when what is there
    /// is not a list of levels (a hostile file gets the default levels, not an error).
    pub fn levels(&self, series: &str) -> Option<Vec<f64>> {
        let text: String = self
            .conn
            .query_row(
                "SELECT levels FROM levels WHERE series = ?1 AND length(CAST(levels AS BLOB)) < 1000",
                [series],
                |r| r.get(0),
            )
            .ok()?;
        let levels: Vec<f64> = text
            .split(',')
            .map(|l| {
                l.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| *v > 0.0 && *v < 1000.0)
            })
            .collect::<Option<_>>()?;
        (!levels.is_empty() && levels.len() <= 20).then_some(levels)
    }

    /// The link capacities (bytes per second) the runs of `series` were made at.
    pub fn capacities(&self, series: &str) -> Result<Vec<f64>> {
        let mut st = self
            .conn
            .prepare("SELECT DISTINCT capacity FROM runs WHERE series = ?1 AND capacity > 0")?;
        let caps = st
            .query_map([series], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(caps)
    }

    /// Write `rows` as CSV (the columns `analyze --csv` reads first, then the rest),
    /// quoted where needed: `seconds` is `time` of each run, said in words (`what`) in the
    /// `seconds_is` column (a comment line would stop readers such as pandas); the job's
    /// wall time is `wall_seconds`.
    pub fn export_csv<W: Write>(
        rows: Vec<RunRow>,
        w: W,
        time: impl Fn(&RunRow) -> Option<f64>,
        what: &str,
    ) -> Result<()> {
        let what = cell(&what.replace(['\n', '\r'], " "));
        let mut out = csv::Writer::from_writer(w);
        out.write_record(EXPORT_COLUMNS)?;
        for r in rows {
            let seconds = time(&r);
            // The rate a command printed (--rate-regex), as it printed it.
            let rate = r
                .metrics
                .as_deref()
                .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
                .and_then(|m| m.get("rate").and_then(|v| v.as_f64()));
            // What the rate is, as its regex names it (`harmonic_mean_TEPS`).
            let rate_name = rate
                .and_then(|_| throttle_analysis::answer::rate_name(&r.series))
                .map(|n| cell(&n))
                .unwrap_or_default();
            let opt = |v: Option<f64>| v.map(|x| x.to_string()).unwrap_or_default();
            let text = |t: String| cell(&t);
            out.write_record([
                text(r.workload),
                r.nodes.to_string(),
                r.procs.to_string(),
                r.bw_pct
                    .percent()
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "unlimited".into()),
                r.repeat.to_string(),
                opt(seconds),
                r.status.to_string(),
                text(r.series),
                r.ranks_per_node.to_string(),
                r.capacity.to_string(),
                r.latency_us.to_string(),
                text(r.started_at),
                opt(r.kernel_seconds),
                opt(r.teps),
                text(r.host),
                text(r.version),
                text(r.job),
                text(r.reason.unwrap_or_default()),
                r.bytes_sent.map(|b| b.to_string()).unwrap_or_default(),
                r.bytes_received.map(|b| b.to_string()).unwrap_or_default(),
                opt(r.cpu_busy_before),
                opt(r.cpu_steal),
                text(r.metrics.unwrap_or_default()),
                text(r.flag.unwrap_or_default()),
                text(r.fidelity.unwrap_or_default()),
                opt(r.seconds),
                opt(rate),
                rate_name,
                what.clone(),
                opt(r.problem),
                r.latency_step.map(|l| l.to_string()).unwrap_or_default(),
                opt(r.cpu_own),
            ])?;
        }
        out.flush()?;
        Ok(())
    }
}

/// A text cell of an exported CSV file: control characters written out (`\n`, `\u{1b}`),
/// and a cell a spreadsheet would take for a formula (`=`, `+`, `-`, `@` first) made text
/// with a leading `'` (OWASP's advice against CSV injection): a store's text comes from
/// commands, their output and the agents, and the file is opened by people.
fn cell(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| {
            if throttle_analysis::table::unsafe_char(c) {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect();
    if out.starts_with(['=', '+', '-', '@']) {
        out.insert(0, '\'');
    }
    out
}

/// The columns of [`Store::export_csv`].
pub const EXPORT_COLUMNS: [&str; 32] = [
    "workload",
    "nodes",
    "procs",
    "bw_pct",
    "repeat",
    "seconds",
    "status",
    "series",
    "ranks_per_node",
    "capacity_bytes_per_sec",
    "latency_us",
    "started_at",
    "kernel_seconds",
    "teps",
    "host",
    "version",
    "job",
    "reason",
    "bytes_sent",
    "bytes_received",
    "cpu_busy_before",
    "cpu_steal",
    "metrics",
    "flag",
    "fidelity",
    "wall_seconds",
    "rate",
    "rate_name",
    "seconds_is",
    "problem",
    "latency_step",
    "cpu_own",
];

/// A directory for the tests' stores: this user's alone (a store is not written in a
/// directory others may write, such as `/tmp` itself).
#[cfg(test)]
pub(crate) fn test_dir() -> PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let d = std::env::temp_dir().join(format!("throttle-unit-{}", nix::unistd::geteuid().as_raw()));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&d);
    d
}

/// `path` with `suffix` added to its name (`-wal`, `-shm`, `-journal`), bytes kept.
fn side_file(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// `path` for a `file:` URI: every byte but the unreserved ones and `/` percent-encoded
/// (a `?` or `#` in a file name would otherwise start the query or the fragment).
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for &b in path.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Bring a store to [`SCHEMA_VERSION`]: add the columns it lacks, in one write
/// transaction taken before reading the version (two processes opening an old store at
/// once: the second sees the first's work and adds nothing).
fn migrate(conn: &Connection) -> Result<()> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    check_version(version)?;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let result = (|| -> Result<()> {
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        check_version(version)?;
        let have: HashSet<String> = {
            let mut st = conn.prepare("SELECT name FROM pragma_table_info('runs')")?;
            let names = st.query_map([], |r| r.get::<_, String>(0))?;
            names.collect::<Result<_, _>>()?
        };
        for (_, name, ty) in ADDED.iter().filter(|(v, _, _)| *v > version) {
            if !have.contains(*name) {
                conn.execute_batch(&format!("ALTER TABLE runs ADD COLUMN {name} {ty}"))?;
            }
        }
        conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
        Ok(())
    })();
    match result {
        Ok(()) => conn.execute_batch("COMMIT")?,
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(e.context(
                "cannot add this version's columns (a read-only file? copy it somewhere writable)",
            ));
        }
    }
    Ok(())
}

fn check_version(version: i64) -> Result<()> {
    if version > SCHEMA_VERSION {
        anyhow::bail!(
            "it was written by a newer throttle (schema {version}; this one knows up to {SCHEMA_VERSION}): use that version, or `export` there and `analyze --csv` here"
        );
    }
    Ok(())
}

/// A stored bandwidth, read through [`FromSql`]: NULL is unlimited, anything else must be
/// a setting in [`Pct`]'s grammar (a number from 0.01 to 100, or text such as `30%` or
/// `unlimited`). A store is a file a user may be handed: a row holding anything else is
/// refused by name, never read as unlimited.
struct StoredPct(Pct);

impl FromSql for StoredPct {
    fn column_result(v: ValueRef<'_>) -> FromSqlResult<StoredPct> {
        let pct = match v {
            ValueRef::Null => Ok(Pct::UNLIMITED),
            ValueRef::Integer(i) => Pct::new(i as f64),
            ValueRef::Real(f) => Pct::new(f),
            ValueRef::Text(t) => {
                Pct::parse(std::str::from_utf8(t).map_err(|e| FromSqlError::Other(Box::new(e)))?)
            }
            ValueRef::Blob(_) => return Err(FromSqlError::InvalidType),
        };
        pct.map(StoredPct)
            .map_err(|e| FromSqlError::Other(Box::new(e)))
    }
}

/// Column `idx` of row `id` of `table` as a bandwidth, or an error naming the row.
fn pct_column(r: &rusqlite::Row<'_>, idx: usize, table: &str, id: i64) -> rusqlite::Result<Pct> {
    r.get::<_, StoredPct>(idx).map(|p| p.0).map_err(|e| {
        let why = match e {
            rusqlite::Error::FromSqlConversionFailure(_, _, inner) => inner.to_string(),
            e => e.to_string(),
        };
        rusqlite::Error::FromSqlConversionFailure(
            idx,
            rusqlite::types::Type::Null,
            format!("row {id} of `{table}` (a damaged or hand-edited store?): bw_pct: {why}")
                .into(),
        )
    })
}

/// A row refused while read: its message alone (it names the row).
fn refused_row(e: rusqlite::Error) -> anyhow::Error {
    match e {
        rusqlite::Error::FromSqlConversionFailure(_, _, why) => anyhow::anyhow!("{why}"),
        e => e.into(),
    }
}

/// A stored status; anything unknown counts as failed (it is not a measurement).
fn status_column(v: String) -> RunStatus {
    v.parse().unwrap_or(RunStatus::Failed)
}

impl RunRow {
    /// Whether the run counts: it succeeded and its links held their setting (not
    /// flagged). The others are kept as the record of what was tried.
    pub fn good(&self) -> bool {
        self.status == RunStatus::Ok && self.flag.is_none()
    }

    /// A successful run of one node and rank for tests (this crate's and the end-to-end
    /// ones, which build stores as the controller writes them), without a time: callers
    /// set what they test (`seconds`, `status`, ...) with struct update syntax.
    pub fn for_test(point_key: &str, series: &str, bw_pct: Pct, repeat: u32) -> RunRow {
        RunRow {
            point_key: point_key.into(),
            series: series.into(),
            workload: "bfs".into(),
            options: "{}".into(),
            nodes: 1,
            ranks_per_node: 1,
            procs: 1,
            bw_pct,
            capacity: 125e6,
            latency_us: 0,
            repeat,
            started_at: "2026-11-25T00:00:00Z".into(),
            seconds: None,
            kernel_seconds: None,
            teps: None,
            status: RunStatus::Ok,
            reason: None,
            host: "h".into(),
            version: "0".into(),
            job: "j".into(),
            bytes_sent: None,
            bytes_received: None,
            cpu_busy_before: None,
            cpu_steal: None,
            metrics: None,
            fidelity: None,
            flag: None,
            problem: None,
            latency_step: None,
            cpu_own: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, status: RunStatus) -> RunRow {
        let ok = status == RunStatus::Ok;
        RunRow {
            point_key: key.into(),
            series: "bfs scale=8".into(),
            workload: "bfs".into(),
            options: "{}".into(),
            nodes: 2,
            ranks_per_node: 1,
            procs: 2,
            bw_pct: Pct::new(50.0).unwrap(),
            capacity: 125e6,
            latency_us: 0,
            repeat: 0,
            started_at: "2026-11-22T08:00:00Z".into(),
            seconds: ok.then_some(1.5),
            kernel_seconds: None,
            teps: None,
            status,
            reason: (!ok).then(|| "rank 1 exited, \"with quotes\", and a comma".into()),
            host: "h".into(),
            version: "0.1.0".into(),
            job: "j".into(),
            bytes_sent: ok.then_some(1 << 33),
            bytes_received: ok.then_some(12345),
            cpu_busy_before: Some(0.03),
            cpu_steal: None,
            metrics: ok.then(|| r#"{"tflops":2.5e-10}"#.into()),
            fidelity: None,
            flag: None,
            problem: None,
            latency_step: None,
            cpu_own: None,
        }
    }

    /// A store as the first schema wrote it (no user_version, no traffic or load
    /// columns), with one run.
    fn version_0(path: &Path) {
        let c = Connection::open(path).unwrap();
        c.execute_batch(
            "CREATE TABLE runs (id INTEGER PRIMARY KEY, point_key TEXT NOT NULL, series TEXT NOT NULL,
               workload TEXT NOT NULL, options TEXT NOT NULL, nodes INTEGER NOT NULL,
               ranks_per_node INTEGER NOT NULL, procs INTEGER NOT NULL, bw_pct REAL,
               capacity REAL NOT NULL, latency_us INTEGER NOT NULL, repeat INTEGER NOT NULL,
               started_at TEXT NOT NULL, seconds REAL, kernel_seconds REAL, teps REAL,
               status TEXT NOT NULL, reason TEXT, host TEXT NOT NULL, version TEXT NOT NULL,
               job TEXT NOT NULL);
             INSERT INTO runs (point_key, series, workload, options, nodes, ranks_per_node, procs,
               bw_pct, capacity, latency_us, repeat, started_at, seconds, kernel_seconds, teps,
               status, reason, host, version, job)
             VALUES ('k', 'bfs scale=8', 'bfs', '{}', 2, 1, 2, 50.0, 125000000.0, 0, 0,
               '2026-11-01T08:00:00Z', 1.25, NULL, NULL, 'ok', NULL, 'h', '0.1.0', 'j');",
        )
        .unwrap();
    }

    #[test]
    fn a_runs_output_is_stored_with_it_and_found_by_its_job() {
        let path =
            crate::store::test_dir().join(format!("throttle-store-out-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        // An older store (no outputs table) gets the table when opened.
        version_0(&path);
        let s = Store::open(&path).unwrap();
        let lines: Vec<String> = (1..=100).map(|i| format!("line {i}")).collect();
        let mut r = row("k", RunStatus::Ok);
        r.job = "sw1-command-1".into();
        s.insert_with_output(&r, &lines).unwrap();
        r.job = "sw1-command-2".into();
        s.insert_with_output(&r, &[]).unwrap();
        let out = s.outputs_of("sw1-command-1").unwrap();
        assert_eq!(out.len(), 1);
        assert!(out[0].starts_with("line 1\nline 2\n"), "{}", &out[0][..20]);
        assert!(out[0].ends_with("line 100\n"));
        assert!(s.outputs_of("sw1-command-2").unwrap().is_empty());
        assert!(s.has_job("sw1-command-2").unwrap());
        assert!(!s.has_job("nothing").unwrap());
        assert_eq!(s.rows().unwrap().len(), 3);
        let _ = std::fs::remove_file(&path);
    }

    /// The files in `dir`, with their bytes.
    fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name, std::fs::read(e.path()).unwrap())
            })
            .collect();
        files.sort();
        files
    }

    /// A reading command must not write: another program's database, an empty file or a
    /// text file is refused by name and left as it was (no table added, no journal made);
    /// an older store is read as it is, not migrated; a store this build wrote reads the
    /// same and its directory is left as it was.
    #[test]
    fn reading_leaves_every_file_as_it_was_and_refuses_what_is_not_a_store() {
        let dir = std::env::temp_dir().join(format!("throttle-store-read-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let other = dir.join("other.db");
        Connection::open(&other)
            .unwrap()
            .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        std::fs::write(dir.join("empty.db"), b"").unwrap();
        std::fs::write(dir.join("notes.txt"), b"not a database\n").unwrap();
        let before = snapshot(&dir);
        for name in ["other.db", "empty.db", "notes.txt"] {
            let e = Store::read(&dir.join(name)).err().map(|e| format!("{e:#}"));
            assert!(
                e.as_deref()
                    .is_some_and(|e| e.contains("is not a throttle results database")),
                "{name}: {e:?}"
            );
        }
        assert_eq!(snapshot(&dir), before, "a refused file was changed");

        let old = dir.join("old.db");
        version_0(&old);
        let before = snapshot(&dir);
        let s = Store::read(&old).unwrap();
        let rows = s.rows().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].bytes_sent, rows[0].flag.clone()), (None, None));
        assert!(s.links().unwrap().is_empty() && s.outputs_of("j").unwrap().is_empty());
        drop(s);
        assert_eq!(snapshot(&dir), before, "reading an older store changed it");

        let ours = dir.join("ours.db");
        let want = {
            let s = Store::open(&ours).unwrap();
            s.insert(&row("k", RunStatus::Ok)).unwrap();
            s.rows().unwrap()
        };
        let before = snapshot(&dir);
        let s = Store::read(&ours).unwrap();
        assert_eq!(s.rows().unwrap(), want);
        drop(s);
        let after = snapshot(&dir);
        let names = |v: &[(String, Vec<u8>)]| -> Vec<(String, usize)> {
            v.iter().map(|(n, b)| (n.clone(), b.len())).collect()
        };
        assert_eq!(
            names(&after),
            names(&before),
            "reading a store changed its directory"
        );
        assert_eq!(after, before, "reading a store changed a file's bytes");
        // A name a URI would misread.
        let odd = dir.join("our store #1?%20.db");
        std::fs::copy(&ours, &odd).unwrap();
        assert_eq!(Store::read(&odd).unwrap().rows().unwrap(), want);
        // While a sweep writes it: read as SQLite's readers read, the new row seen.
        let writer = Store::open(&ours).unwrap();
        writer.insert(&row("k2", RunStatus::Ok)).unwrap();
        assert_eq!(Store::read(&ours).unwrap().rows().unwrap().len(), 2);
        drop(writer);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_store_of_the_first_schema_opens_and_keeps_its_rows() {
        let path =
            crate::store::test_dir().join(format!("throttle-store-v0-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        version_0(&path);
        let s = Store::open(&path).unwrap();
        let rows = s.rows().unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].seconds, Some(1.25));
        assert_eq!((rows[0].bytes_sent, rows[0].cpu_busy_before), (None, None));
        s.insert(&row("new", RunStatus::Ok)).unwrap();
        let rows = s.rows().unwrap();
        assert_eq!(rows[1].bytes_sent, Some(1 << 33));
        assert_eq!(rows[1].cpu_busy_before, Some(0.03));
        assert_eq!(rows[1].metrics.as_deref(), Some(r#"{"tflops":2.5e-10}"#));
        assert_eq!(rows[0].metrics, None);
        assert_eq!(
            (rows[0].fidelity.as_deref(), rows[0].flag.as_deref()),
            (None, None)
        );
        // An older store's runs have no problem value and are no latency points.
        assert_eq!((rows[0].problem, rows[0].latency_step), (None, None));
        // ... nor a share of the cores.
        assert_eq!(rows[0].cpu_own, None);
        s.insert(&RunRow {
            problem: Some(14.0),
            latency_step: Some(250),
            cpu_own: Some(0.91),
            ..row("both", RunStatus::Ok)
        })
        .unwrap();
        let last = s.rows().unwrap().pop().unwrap();
        assert_eq!((last.problem, last.latency_step), (Some(14.0), Some(250)));
        assert_eq!(last.cpu_own, Some(0.91));
        let v: i64 = s
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        drop(s);
        // Opening again changes nothing.
        assert_eq!(Store::open(&path).unwrap().rows().unwrap().len(), 3);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_flagged_run_is_kept_but_neither_done_nor_forgotten() {
        let path =
            crate::store::test_dir().join(format!("throttle-store-flag-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let s = Store::open(&path).unwrap();
        let mut flagged = row("p", RunStatus::Ok);
        flagged.flag = Some("n1 egress carried 76.0% of its setting while backlogged".into());
        flagged.fidelity = Some(r#"{"seconds":1.0,"nodes":[],"flags":["x"]}"#.into());
        s.insert(&flagged).unwrap();
        // Not done: a sweep runs the point again; counted as an attempt: not forever.
        assert!(!s.done_points().unwrap().contains("p"));
        assert_eq!(s.failed_attempts().unwrap().get("p"), Some(&1));
        s.insert(&row("p", RunStatus::Ok)).unwrap();
        assert!(s.done_points().unwrap().contains("p"));
        let rows = s.rows().unwrap();
        assert_eq!(rows[0], flagged);
        let mut csv = Vec::new();
        Store::export_csv(s.rows().unwrap(), &mut csv, |r| r.seconds, "wall").unwrap();
        let csv = String::from_utf8(csv).unwrap();
        // No comment line (pandas and others stop at one): the header comes first, and
        // what `seconds` is goes in a column.
        assert!(
            csv.lines().next().unwrap().ends_with(
                ",flag,fidelity,wall_seconds,rate,rate_name,seconds_is,problem,latency_step,cpu_own"
            ),
            "{csv}"
        );
        assert!(csv.lines().nth(1).unwrap().ends_with(",wall,,,"), "{csv}");
        assert!(csv.contains("76.0% of its setting"), "{csv}");
        drop(s);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_store_of_a_newer_schema_is_refused() {
        let path =
            crate::store::test_dir().join(format!("throttle-store-v9-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        version_0(&path);
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 9)
            .unwrap();
        let e = format!("{:#}", Store::open(&path).err().unwrap());
        assert!(
            e.contains("newer throttle") && e.contains("schema 9"),
            "{e}"
        );
        let _ = std::fs::remove_file(&path);
    }

    /// Stored bandwidths are read through one type: what older throttles wrote (a REAL
    /// with more decimals, NULL for unlimited) still reads, and a value no setting can
    /// have is refused with its row named instead of read as unlimited.
    #[test]
    fn stored_bandwidths_are_settings_or_their_row_is_refused() {
        let path =
            crate::store::test_dir().join(format!("throttle-store-pct-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let s = Store::open(&path).unwrap();
        for key in ["a", "b", "c", "d"] {
            s.insert(&row(key, RunStatus::Ok)).unwrap();
        }
        let set = |key: &str, v: &str| {
            s.conn
                .execute(
                    &format!("UPDATE runs SET bw_pct = {v} WHERE point_key = '{key}'"),
                    [],
                )
                .unwrap()
        };
        set("a", "33.3333");
        set("b", "NULL");
        set("c", "'30%'");
        set("d", "100");
        let got: Vec<String> = s
            .rows()
            .unwrap()
            .iter()
            .map(|r| r.bw_pct.to_string())
            .collect();
        assert_eq!(got, ["33.333%", "unlimited", "30%", "100%"]);
        for bad in ["150", "0", "-3", "'half'", "x'00'"] {
            set("c", bad);
            let e = format!("{:#}", s.rows().unwrap_err());
            assert!(
                e.contains("row 3 of `runs`") && e.contains("bw_pct"),
                "{bad}: {e}"
            );
        }
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn stores_runs_and_knows_what_is_done() {
        let path =
            crate::store::test_dir().join(format!("throttle-store-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        {
            let s = Store::open(&path).unwrap();
            s.insert(&row("a", RunStatus::Ok)).unwrap();
            s.insert(&row("b", RunStatus::Failed)).unwrap();
            s.insert(&row("b", RunStatus::Failed)).unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.done_points().unwrap(), HashSet::from(["a".to_string()]));
        assert_eq!(s.failed_attempts().unwrap().get("b"), Some(&2));
        let rows = s.rows().unwrap();
        assert_eq!(rows[0], row("a", RunStatus::Ok));
        let mut out = Vec::new();
        Store::export_csv(s.rows().unwrap(), &mut out, |r| r.seconds, "wall").unwrap();
        let text = String::from_utf8(out).unwrap();
        // The reason's quotes and comma survive the export.
        let mut r = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        let reasons: Vec<String> = r
            .records()
            .map(|rec| rec.unwrap()[17].to_string())
            .collect();
        assert_eq!(reasons[1], "rank 1 exited, \"with quotes\", and a comma");
        let _ = std::fs::remove_file(&path);
    }

    /// Issue 43, finding 7: a cell larger than a run writes is refused by row, before the
    /// rows are read into memory.
    #[test]
    fn a_huge_cell_is_refused_by_row() {
        let path = test_dir().join(format!("throttle-store-huge-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&path).unwrap();
        let pct = Pct::new(100.0).unwrap();
        store
            .insert(&RunRow::for_test("s/1/100/0", "s", pct, 0))
            .unwrap();
        store
            .insert(&RunRow {
                reason: Some("x".repeat(2 << 20)),
                ..RunRow::for_test("s/1/100/1", "s", pct, 1)
            })
            .unwrap();
        let e = store.rows().err().unwrap().to_string();
        assert!(e.contains("row 2") && e.contains("2097152 bytes"), "{e}");
        drop(store);
        let _ = std::fs::remove_file(&path);
    }

    /// Issue 35, finding 9: a link planted where the database (or its journal) goes is not
    /// followed, and no database is made where it points; a directory others may write and
    /// rename in is refused.
    #[test]
    fn a_planted_link_is_no_database() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("throttle-db-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("chosen-by-another-user");
        std::os::unix::fs::symlink(&target, dir.join("results.db")).unwrap();
        let e = format!("{:#}", Store::open(&dir.join("results.db")).err().unwrap());
        assert!(e.contains("symbolic link"), "{e}");
        assert!(
            !target.exists(),
            "a database was made where the link points"
        );
        std::os::unix::fs::symlink(&target, dir.join("other.db-wal")).unwrap();
        let e = format!("{:#}", Store::open(&dir.join("other.db")).err().unwrap());
        assert!(e.contains("other.db-wal is a symbolic link"), "{e}");
        let open = dir.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = format!("{:#}", Store::open(&open.join("r.db")).err().unwrap());
        assert!(e.contains("other users may write"), "{e}");
        // Sticky, as /tmp: read there, but not written (another user could still put a
        // journal file of theirs beside it between the check and SQLite's open).
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        drop(Store::open(&open.join("r.db")).unwrap());
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = format!("{:#}", Store::open(&open.join("r.db")).err().unwrap());
        assert!(e.contains("sticky"), "{e}");
        assert!(Store::read(&open.join("r.db")).is_ok());
        // Not a file: refused at once (a FIFO is never opened, so nothing hangs).
        nix::unistd::mkfifo(
            &dir.join("fifo.db"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let e = format!("{:#}", Store::read(&dir.join("fifo.db")).err().unwrap());
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::create_dir(dir.join("dir.db")).unwrap();
        let e = format!("{:#}", Store::open(&dir.join("dir.db")).err().unwrap());
        assert!(e.contains("not a regular file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 35, finding 8: text from a run reaches the CSV file neither as a formula nor
    /// with its control characters.
    #[test]
    fn exported_text_is_no_formula_and_no_control() {
        assert_eq!(cell("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
        assert_eq!(
            cell("=HYPERLINK(\"http://x\")"),
            "'=HYPERLINK(\"http://x\")"
        );
        assert_eq!(cell("@SUM(1)"), "'@SUM(1)");
        assert_eq!(
            cell("rank 1\n\u{1b}[31mfailed"),
            "rank 1\\n\\u{1b}[31mfailed"
        );
        assert_eq!(cell("bfs scale=8"), "bfs scale=8");
        assert_eq!(cell("mw\u{202e}exe"), "mw\\u{202e}exe");
        let mut buf = Vec::new();
        let row = RunRow {
            reason: Some("=1+1\r\nevil".into()),
            ..RunRow::for_test("k", "=series", Pct::new(50.0).unwrap(), 0)
        };
        Store::export_csv(vec![row], &mut buf, |r| r.seconds, "test").unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(
            text.contains("'=1+1\\r\\nevil") && text.contains("'=series"),
            "{text}"
        );
        assert!(!text.contains("\r"), "{text:?}");
    }
}
