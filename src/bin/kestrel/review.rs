//! `kestrel review`: the pending snapshots a test run left (insta's `.snap.new` files), with
//! each distinct changed hunk shown once beside the snapshots it appears in, accepted or
//! rejected per group.
//!
//! insta's files stay the source of truth: a pending snapshot is accepted (its `.snap.new`
//! replaces the `.snap`) once every group it takes part in is accepted, and rejected (the
//! `.snap.new` is deleted) once every one is rejected; a snapshot with groups of both kinds,
//! or with a skipped group, is left pending for `cargo insta review`.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use similar::{ChangeTag, TextDiff};

use crate::args::ReviewArgs;
use crate::failure::Failure;

/// Lines of context shown around each change.
const CONTEXT: usize = 3;

/// A snapshot with a pending new version.
#[derive(Debug)]
pub struct Pending {
    /// The snapshot's name: its file name without the test's prefix and the extension.
    pub name: String,
    pub accepted: PathBuf,
    pub pending: PathBuf,
    /// The accepted contents (no insta header), or `None` for a new snapshot.
    pub old: Option<String>,
    pub new: String,
}

/// What a reviewer decides once for every snapshot a change appears in.
#[derive(Debug)]
pub struct Group {
    /// The hunk as shown: unified-diff lines with context, from its first snapshot.
    pub shown: String,
    /// Indices into the pending list, in order.
    pub snapshots: Vec<usize>,
}

/// A decision on a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Accept,
    Reject,
    Skip,
}

/// What became of each pending snapshot.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub accepted: Vec<String>,
    pub rejected: Vec<String>,
    pub left_pending: Vec<String>,
}

pub fn review(args: &ReviewArgs) -> Result<(), Failure> {
    let pending = find_pending(&args.dir)?;
    if pending.is_empty() {
        println!(
            "no pending snapshots under {}: run the tests first",
            args.dir.display()
        );
        return Ok(());
    }
    let groups = group(&pending);
    println!(
        "{} pending snapshots, {} distinct changes",
        pending.len(),
        groups.len()
    );
    let decisions = if args.list {
        print_groups(&pending, &groups);
        return Ok(());
    } else if args.accept_all {
        vec![Decision::Accept; groups.len()]
    } else if args.reject_all {
        vec![Decision::Reject; groups.len()]
    } else {
        ask(&pending, &groups, std::io::stdin().lock())?
    };
    let outcome = apply(&pending, &groups, &decisions)?;
    println!(
        "accepted {}, rejected {}, left pending {}",
        outcome.accepted.len(),
        outcome.rejected.len(),
        outcome.left_pending.len()
    );
    for name in &outcome.left_pending {
        println!("  still pending: {name}");
    }
    Ok(())
}

/// Every `.snap.new` under `dir` (not recursive), sorted by name.
pub fn find_pending(dir: &Path) -> Result<Vec<Pending>, Failure> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        Failure::failed(format!(
            "cannot read the snapshot folder {}: {e} (pass --dir)",
            dir.display()
        ))
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".snap.new"))
        .collect();
    paths.sort();
    paths.into_iter().map(|p| read_pending(&p)).collect()
}

fn read_pending(pending: &Path) -> Result<Pending, Failure> {
    let text = |p: &Path| {
        std::fs::read_to_string(p)
            .map_err(|e| Failure::failed(format!("cannot read {}: {e}", p.display())))
    };
    let accepted = pending.with_extension("");
    let old = if accepted.exists() {
        Some(body(&text(&accepted)?).to_string())
    } else {
        None
    };
    let file = accepted
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = file.strip_suffix(".snap").unwrap_or(&file);
    let name = stem.rsplit("__").next().unwrap_or(stem).to_string();
    Ok(Pending {
        name,
        new: body(&text(pending)?).to_string(),
        accepted,
        pending: pending.to_path_buf(),
        old,
    })
}

/// A snapshot file's contents after insta's `---` header.
fn body(file: &str) -> &str {
    file.strip_prefix("---\n")
        .and_then(|rest| rest.split_once("\n---\n"))
        .map_or(file, |(_, body)| body)
}

/// Groups the pending snapshots' changed hunks by their changed lines: a hunk that reads
/// the same in several snapshots is one group. New snapshots form one group.
pub fn group(pending: &[Pending]) -> Vec<Group> {
    let mut by_change: BTreeMap<String, usize> = BTreeMap::new();
    let mut groups: Vec<Group> = Vec::new();
    let mut join = |groups: &mut Vec<Group>, change: String, shown: String, index: usize| {
        let g = *by_change.entry(change).or_insert_with(|| {
            groups.push(Group {
                shown,
                snapshots: Vec::new(),
            });
            groups.len() - 1
        });
        if groups[g].snapshots.last() != Some(&index) {
            groups[g].snapshots.push(index);
        }
    };
    for (index, p) in pending.iter().enumerate() {
        let Some(old) = &p.old else {
            let shown = "(new snapshots: no accepted version yet)\n".to_string();
            join(&mut groups, String::from("\0new"), shown, index);
            continue;
        };
        let hunks = hunks(old, &p.new);
        if hunks.is_empty() {
            let shown = "(only insta's header changed)\n".to_string();
            join(&mut groups, String::from("\0header"), shown, index);
        }
        for (change, shown) in hunks {
            join(&mut groups, change, shown, index);
        }
    }
    groups
}

/// Each hunk of the diff `old` -> `new`: its changed lines (the grouping key) and its
/// unified-diff text with context.
fn hunks(old: &str, new: &str) -> Vec<(String, String)> {
    let diff = TextDiff::from_lines(old, new);
    diff.grouped_ops(CONTEXT)
        .iter()
        .map(|ops| {
            let mut change = String::new();
            let mut shown = String::new();
            for op in ops {
                for line in diff.iter_changes(op) {
                    let sign = match line.tag() {
                        ChangeTag::Delete => "-",
                        ChangeTag::Insert => "+",
                        ChangeTag::Equal => " ",
                    };
                    let text = line.to_string_lossy();
                    let text = text.trim_end_matches('\n');
                    if line.tag() != ChangeTag::Equal {
                        change.push_str(sign);
                        change.push_str(text);
                        change.push('\n');
                    }
                    shown.push_str(sign);
                    shown.push_str(text);
                    shown.push('\n');
                }
            }
            (change, shown)
        })
        .collect()
}

fn print_group(pending: &[Pending], groups: &[Group], g: usize) {
    let group = &groups[g];
    let names: Vec<&str> = group
        .snapshots
        .iter()
        .map(|&i| pending[i].name.as_str())
        .collect();
    println!(
        "\n== change {} of {}: in {} snapshot(s): {}",
        g + 1,
        groups.len(),
        names.len(),
        names.join(", ")
    );
    print!("{}", group.shown);
}

fn print_groups(pending: &[Pending], groups: &[Group]) {
    for g in 0..groups.len() {
        print_group(pending, groups, g);
    }
}

/// Shows each group and reads a decision for it from `input`, a line each: `a` accept,
/// `r` reject, `s` (or an empty line) skip. The end of the input skips what is left.
pub fn ask(
    pending: &[Pending],
    groups: &[Group],
    mut input: impl BufRead,
) -> Result<Vec<Decision>, Failure> {
    let mut decisions = Vec::new();
    for g in 0..groups.len() {
        print_group(pending, groups, g);
        let decision = loop {
            print!("accept, reject or skip this change? [a/r/s] ");
            std::io::stdout()
                .flush()
                .map_err(|e| Failure::failed(format!("cannot write the prompt: {e}")))?;
            let mut line = String::new();
            let read = input
                .read_line(&mut line)
                .map_err(|e| Failure::failed(format!("cannot read the answer: {e}")))?;
            match (read, line.trim()) {
                (0, _) => break Decision::Skip,
                (_, "a") => break Decision::Accept,
                (_, "r") => break Decision::Reject,
                (_, "s" | "") => break Decision::Skip,
                (_, other) => println!("`{other}` is not one of a, r, s"),
            }
        };
        decisions.push(decision);
    }
    Ok(decisions)
}

/// Accepts or rejects each pending snapshot whose groups all got the same decision, and
/// leaves the others pending.
pub fn apply(
    pending: &[Pending],
    groups: &[Group],
    decisions: &[Decision],
) -> Result<Outcome, Failure> {
    let mut per_snapshot: Vec<Vec<Decision>> = vec![Vec::new(); pending.len()];
    for (group, decision) in groups.iter().zip(decisions) {
        for &i in &group.snapshots {
            per_snapshot[i].push(*decision);
        }
    }
    let mut outcome = Outcome::default();
    for (p, decisions) in pending.iter().zip(per_snapshot) {
        let all = |d: Decision| !decisions.is_empty() && decisions.iter().all(|x| *x == d);
        if all(Decision::Accept) {
            std::fs::rename(&p.pending, &p.accepted).map_err(|e| {
                Failure::failed(format!("cannot accept {}: {e}", p.pending.display()))
            })?;
            outcome.accepted.push(p.name.clone());
        } else if all(Decision::Reject) {
            std::fs::remove_file(&p.pending).map_err(|e| {
                Failure::failed(format!("cannot reject {}: {e}", p.pending.display()))
            })?;
            outcome.rejected.push(p.name.clone());
        } else {
            outcome.left_pending.push(p.name.clone());
        }
    }
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "---\nsource: tests/snapshots_decode.rs\nexpression: module.text\n---\n";

    /// A folder with an accepted and a pending snapshot per `(name, old, new)`.
    fn folder(snapshots: &[(&str, Option<&str>, &str)]) -> tempdir::Dir {
        let dir = tempdir::Dir::new();
        for (name, old, new) in snapshots {
            let file = dir
                .path()
                .join(format!("snapshots_decode__swap_ab_decode__{name}.snap"));
            if let Some(old) = old {
                std::fs::write(&file, format!("{HEADER}{old}")).unwrap();
            }
            std::fs::write(file.with_extension("snap.new"), format!("{HEADER}{new}")).unwrap();
        }
        dir
    }

    mod tempdir {
        use std::path::{Path, PathBuf};

        /// A fresh folder under the system's temporary one, removed on drop.
        pub struct Dir(PathBuf);

        impl Dir {
            pub fn new() -> Dir {
                use std::sync::atomic::{AtomicUsize, Ordering};
                static NEXT: AtomicUsize = AtomicUsize::new(0);
                let n = NEXT.fetch_add(1, Ordering::Relaxed);
                let path =
                    std::env::temp_dir().join(format!("kestrel-review-{}-{n}", std::process::id()));
                std::fs::create_dir_all(&path).unwrap();
                Dir(path)
            }

            pub fn path(&self) -> &Path {
                &self.0
            }
        }

        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    const OLD: &str = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n";

    #[test]
    fn a_hunk_shared_by_two_snapshots_is_one_group() {
        let shared = OLD.replace("b\n", "B\n");
        let both = shared.replace("k\n", "K\n");
        let dir = folder(&[
            ("h16_sm90a", Some(OLD), &shared),
            ("h32_sm90a", Some(OLD), &both),
        ]);
        let pending = find_pending(dir.path()).unwrap();
        let names: Vec<&str> = pending.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["h16_sm90a", "h32_sm90a"]);
        let groups = group(&pending);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].snapshots, [0, 1]);
        assert!(groups[0].shown.contains("-b\n+B\n"));
        assert_eq!(groups[1].snapshots, [1]);
        assert!(groups[1].shown.contains("-k\n+K\n"));
    }

    #[test]
    fn a_snapshot_is_accepted_or_rejected_only_when_all_its_groups_agree() {
        let shared = OLD.replace("b\n", "B\n");
        let both = shared.replace("k\n", "K\n");
        let dir = folder(&[
            ("h16_sm90a", Some(OLD), &shared),
            ("h32_sm90a", Some(OLD), &both),
            ("h64_sm90a", None, "new\n"),
        ]);
        let pending = find_pending(dir.path()).unwrap();
        let groups = group(&pending);
        assert_eq!(groups.len(), 3);
        let answers = "a\nr\nx\nr\n".as_bytes();
        let decisions = ask(&pending, &groups, answers).unwrap();
        assert_eq!(
            decisions,
            [Decision::Accept, Decision::Reject, Decision::Reject]
        );
        let outcome = apply(&pending, &groups, &decisions).unwrap();
        assert_eq!(outcome.accepted, ["h16_sm90a"]);
        assert_eq!(outcome.rejected, ["h64_sm90a"]);
        assert_eq!(outcome.left_pending, ["h32_sm90a"]);
        let accepted = std::fs::read_to_string(&pending[0].accepted).unwrap();
        assert_eq!(body(&accepted), shared);
        assert!(!pending[0].pending.exists());
        assert!(!pending[2].pending.exists() && !pending[2].accepted.exists());
        assert!(pending[1].pending.exists());
        assert_eq!(
            body(&std::fs::read_to_string(&pending[1].accepted).unwrap()),
            OLD
        );
    }

    #[test]
    fn the_end_of_the_answers_skips_the_rest() {
        let dir = folder(&[("h16_sm90a", Some(OLD), &OLD.replace("c\n", "C\n"))]);
        let pending = find_pending(dir.path()).unwrap();
        let groups = group(&pending);
        let decisions = ask(&pending, &groups, "".as_bytes()).unwrap();
        assert_eq!(decisions, [Decision::Skip]);
        let outcome = apply(&pending, &groups, &decisions).unwrap();
        assert_eq!(outcome.left_pending, ["h16_sm90a"]);
    }
}
