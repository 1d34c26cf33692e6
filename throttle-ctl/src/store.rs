//! The results store: one SQLite database (WAL mode), one row per run with every factor.
//!
//! Failed runs are stored too (status `failed` and the reason), so a sweep can retry them
//! up to a limit and the analysis can say how many it left out. Rows are never updated or
//! deleted by throttle; a retry is a new row.

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use rusqlite::{params, Connection};

use crate::analysis::Observation;

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
    /// `None`: unlimited.
    pub bw_pct: Option<f64>,
    pub capacity: f64,
    pub latency_us: u64,
    pub repeat: u32,
    pub started_at: String,
    pub seconds: Option<f64>,
    pub kernel_seconds: Option<f64>,
    pub teps: Option<f64>,
    pub status: String,
    pub reason: Option<String>,
    pub host: String,
    pub version: String,
    pub job: String,
}

pub struct Store {
    conn: Connection,
}

const COLUMNS: &str = "point_key, series, workload, options, nodes, ranks_per_node, procs, bw_pct, capacity, latency_us, repeat, started_at, seconds, kernel_seconds, teps, status, reason, host, version, job";

impl Store {
    /// Open (or create) the database at `path`.
    pub fn open(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)
            .with_context(|| format!("cannot open the results database {}", path.display()))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
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
            CREATE INDEX IF NOT EXISTS runs_point ON runs(point_key, status);",
        )
        .with_context(|| format!("{} is not a throttle results database", path.display()))?;
        Ok(Store { conn })
    }

    pub fn insert(&self, r: &RunRow) -> Result<()> {
        self.conn.execute(
            &format!("INSERT INTO runs ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)"),
            params![
                r.point_key, r.series, r.workload, r.options, r.nodes, r.ranks_per_node, r.procs,
                r.bw_pct, r.capacity, r.latency_us as i64, r.repeat, r.started_at, r.seconds,
                r.kernel_seconds, r.teps, r.status, r.reason, r.host, r.version, r.job
            ],
        )?;
        Ok(())
    }

    /// Points with a successful run.
    pub fn done_points(&self) -> Result<HashSet<String>> {
        let mut st = self
            .conn
            .prepare("SELECT DISTINCT point_key FROM runs WHERE status = 'ok'")?;
        let rows = st.query_map([], |r| r.get::<_, String>(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Failed attempts per point.
    pub fn failed_attempts(&self) -> Result<HashMap<String, u32>> {
        let mut st = self.conn.prepare(
            "SELECT point_key, COUNT(*) FROM runs WHERE status != 'ok' GROUP BY point_key",
        )?;
        let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, u32>(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn rows(&self) -> Result<Vec<RunRow>> {
        let mut st = self
            .conn
            .prepare(&format!("SELECT {COLUMNS} FROM runs ORDER BY id"))?;
        let rows = st.query_map([], |r| {
            Ok(RunRow {
                point_key: r.get(0)?,
                series: r.get(1)?,
                workload: r.get(2)?,
                options: r.get(3)?,
                nodes: r.get(4)?,
                ranks_per_node: r.get(5)?,
                procs: r.get(6)?,
                bw_pct: r.get(7)?,
                capacity: r.get(8)?,
                latency_us: r.get::<_, i64>(9)? as u64,
                repeat: r.get(10)?,
                started_at: r.get(11)?,
                seconds: r.get(12)?,
                kernel_seconds: r.get(13)?,
                teps: r.get(14)?,
                status: r.get(15)?,
                reason: r.get(16)?,
                host: r.get(17)?,
                version: r.get(18)?,
                job: r.get(19)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every run as an observation for the analysis, with the chosen completion time:
    /// `job` (wall time of the job), `kernel` (the workload's own timing), or `auto`
    /// (kernel when every successful run reported one). Returns the observations and a
    /// description of the time used.
    pub fn observations(&self, time: &str) -> Result<(Vec<Observation>, String)> {
        let rows = self.rows()?;
        let all_kernel = rows
            .iter()
            .filter(|r| r.status == "ok")
            .all(|r| r.kernel_seconds.is_some());
        let kernel = match time {
            "job" => false,
            "kernel" => {
                if !all_kernel {
                    anyhow::bail!(
                        "--time kernel: some runs did not report a kernel time; use --time job"
                    );
                }
                true
            }
            "auto" => all_kernel,
            other => anyhow::bail!("--time `{other}` is not auto, job or kernel"),
        };
        let obs = rows
            .into_iter()
            .map(|r| {
                let t = if kernel { r.kernel_seconds } else { r.seconds };
                Observation {
                    ok: r.status == "ok" && t.is_some(),
                    series: r.series,
                    procs: r.procs,
                    bw_pct: r.bw_pct,
                    repeat: r.repeat,
                    seconds: t.unwrap_or(0.0),
                }
            })
            .collect();
        let what = if kernel {
            "kernel time reported by the workload (BFS: sum of the search times)"
        } else {
            "job completion time (rank 0's start to exit)"
        };
        Ok((obs, what.to_string()))
    }

    /// Link capacity of the stored runs, if they agree.
    pub fn capacity(&self) -> Result<Option<f64>> {
        let mut st = self.conn.prepare("SELECT DISTINCT capacity FROM runs")?;
        let caps: Vec<f64> = st.query_map([], |r| r.get(0))?.collect::<Result<_, _>>()?;
        Ok((caps.len() == 1).then(|| caps[0]))
    }

    /// Write every row as CSV (the columns `analyze --csv` reads, plus the rest).
    pub fn export_csv<W: Write>(&self, mut w: W) -> Result<()> {
        writeln!(w, "workload,nodes,procs,bw_pct,repeat,seconds,status,series,ranks_per_node,capacity,latency_us,started_at,kernel_seconds,teps,host,version,job,reason")?;
        let clean = |s: &str| s.replace([',', '\n', '"'], " ");
        for r in self.rows()? {
            writeln!(
                w,
                "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
                r.workload,
                r.nodes,
                r.procs,
                r.bw_pct
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "unlimited".into()),
                r.repeat,
                r.seconds
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "NaN".into()),
                if r.status == "ok" { "ok" } else { "failed" },
                clean(&r.series),
                r.ranks_per_node,
                r.capacity,
                r.latency_us,
                r.started_at,
                r.kernel_seconds.map(|s| s.to_string()).unwrap_or_default(),
                r.teps.map(|s| s.to_string()).unwrap_or_default(),
                clean(&r.host),
                r.version,
                r.job,
                clean(r.reason.as_deref().unwrap_or(""))
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, status: &str) -> RunRow {
        RunRow {
            point_key: key.into(),
            series: "bfs scale=8".into(),
            workload: "bfs".into(),
            options: "{}".into(),
            nodes: 2,
            ranks_per_node: 1,
            procs: 2,
            bw_pct: Some(50.0),
            capacity: 125e6,
            latency_us: 0,
            repeat: 0,
            started_at: "2026-11-22T08:00:00Z".into(),
            seconds: (status == "ok").then_some(1.5),
            kernel_seconds: None,
            teps: None,
            status: status.into(),
            reason: (status != "ok").then(|| "rank 1 exited".into()),
            host: "h".into(),
            version: "0.1.0".into(),
            job: "j".into(),
        }
    }

    #[test]
    fn stores_runs_and_knows_what_is_done() {
        let path = std::env::temp_dir().join(format!("throttle-store-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        {
            let s = Store::open(&path).unwrap();
            s.insert(&row("a", "ok")).unwrap();
            s.insert(&row("b", "failed")).unwrap();
            s.insert(&row("b", "failed")).unwrap();
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(s.done_points().unwrap(), HashSet::from(["a".to_string()]));
        assert_eq!(s.failed_attempts().unwrap().get("b"), Some(&2));
        let rows = s.rows().unwrap();
        assert_eq!(rows[0], row("a", "ok"));
        let (obs, _) = s.observations("auto").unwrap();
        assert_eq!(obs.iter().filter(|o| !o.ok).count(), 2);
        let mut csv = Vec::new();
        s.export_csv(&mut csv).unwrap();
        let text = String::from_utf8(csv).unwrap();
        // The export reads back through the CSV analysis input.
        let back = crate::analysis::csv::parse(&text).unwrap();
        assert_eq!(back.len(), 3);
        assert_eq!(back.iter().filter(|o| o.ok).count(), 1);
        let _ = std::fs::remove_file(&path);
    }
}
