//! The warps that work on a KV tile together: the whole CTA, or one of the two teams of 8
//! warps that the sm_90a streamed schedule runs side by side (`stream.rs` says why), each
//! with its own buffers and its own barrier.

use dsl_core::arch::sync::{NamedBarrier, sync_threads};
use dsl_core::trace::Val;
use dsl_macros::device;

use crate::swap_ab_decode::THREADS;

/// The named barrier both of two teams pass once ([`Team::wait_for_the_first_team`]); a
/// team's own barrier is `1 + index`.
const STAGGER_BARRIER: u32 = 3;

/// The name of team `team`'s shared buffer `what` in the shared-memory map: the plain name
/// for the first (or only) team, `what_team1` for the second.
pub fn buffer_name(what: &str, team: u32) -> String {
    match team {
        0 => what.to_string(),
        t => format!("{what}_team{t}"),
    }
}

/// One team: which it is, this thread's place in it, and the barrier its warps meet at.
#[derive(Clone, Copy)]
pub struct Team {
    /// 0, or 1 for the second of two teams.
    pub index: u32,
    /// Threads of the team: 512 (the CTA) or 256.
    pub threads: u32,
    /// This thread's index, warp and lane within the team.
    pub tid: Val<u32>,
    pub warp: Val<u32>,
    pub lane: Val<u32>,
    /// `bar.sync 0` when the team is the CTA.
    barrier: Option<NamedBarrier>,
    /// Of two teams: the barrier that starts them half a tile apart.
    stagger: Option<NamedBarrier>,
}

impl Team {
    /// The CTA as one team, from this thread's CTA-wide index, warp and lane.
    pub fn whole_cta(tid: Val<u32>, warp: Val<u32>, lane: Val<u32>) -> Team {
        Team {
            index: 0,
            threads: THREADS as u32,
            tid,
            warp,
            lane,
            barrier: None,
            stagger: None,
        }
    }

    /// Team `index` of two (warps `8 index ..`), from this thread's CTA-wide index, warp and
    /// lane; its barrier is named barrier `1 + index`.
    #[track_caller]
    pub fn of_two(index: u32, tid: Val<u32>, warp: Val<u32>, lane: Val<u32>) -> Team {
        let threads = THREADS as u32 / 2;
        let (tid, warp) = if index == 0 {
            (tid, warp)
        } else {
            (tid - index * threads, warp - index * (threads / 32))
        };
        Team {
            index,
            threads,
            tid,
            warp,
            lane,
            barrier: Some(NamedBarrier::new(1 + index, threads)),
            stagger: Some(NamedBarrier::new(STAGGER_BARRIER, THREADS as u32)),
        }
    }

    /// Every thread of the team waits here; their earlier shared-memory writes are visible
    /// to the team after it.
    #[track_caller]
    pub fn sync(&self) {
        match self.barrier {
            None => sync_threads(),
            Some(barrier) => barrier.sync(),
        }
    }

    /// Of two teams, each meets at its own barrier before a CTA barrier past which one team
    /// reads what the other stored (the merge reads both teams' partials and statistics;
    /// the second team's issuers read the slot ids the merge staged for the next token);
    /// nothing for the CTA as one team. The CTA barrier alone orders those stores before
    /// the loads (PTX: `bar.sync` makes a thread's earlier shared-memory writes visible past
    /// it), yet compute-sanitizer's racecheck (H100, driver 580.159) reported them in each
    /// two-team key whose CTA merges alone (1169 hazards for one token of
    /// `h16_nk128_ne512_fp8_p64x64_stream_sm90a` before the merge; 64-256 for the staged
    /// slot ids of a persistent CTA's next token); with this barrier first it reports none,
    /// and the sanitizer is a check the kernel keeps passing (README, "The streamed kernels
    /// under racecheck").
    #[track_caller]
    pub fn meet_before_the_cta(&self) {
        if self.barrier.is_some() {
            self.sync();
        }
    }

    /// Of two teams, the second waits here, before its first tile's dequant (`done`, the
    /// team's tiles so far, is 0), until the first has dequantised its first tile
    /// ([`Team::first_dequant_done`]; [`Team::streamed_no_tile`] where a team has none).
    /// Started together, the teams dequantise at once and then issue their MMAs at once;
    /// half a tile apart, one team's dequant runs beside the other's MMAs and softmax
    /// (`stream.rs` has the figures).
    #[device]
    pub fn wait_for_the_first_team(&self, done: Val<u32>) {
        if self.index == 1 {
            self.stagger_turn(done);
        }
    }

    /// The first team's side of [`Team::wait_for_the_first_team`], after its first tile's
    /// dequant (`done` is 0): it signals once and does not wait.
    #[device]
    pub fn first_dequant_done(&self, done: Val<u32>) {
        if self.index == 0 {
            self.stagger_turn(done);
        }
    }

    /// After a team's last list: a team that streamed no tile (`done` is 0) takes its turn
    /// at the stagger barrier now, so that the other is not left waiting.
    #[device]
    pub fn streamed_no_tile(&self, done: Val<u32>) {
        self.stagger_turn(done);
    }

    /// This team's one turn at the stagger barrier, while `done` is 0: the first team
    /// arrives and goes on, the second waits for it. Nothing with one team.
    #[device]
    fn stagger_turn(&self, done: Val<u32>) {
        if let Some(stagger) = self.stagger {
            if done == 0u32 {
                if self.index == 0 {
                    stagger.arrive();
                } else {
                    stagger.sync();
                }
            }
        }
    }

    /// Warps of the team.
    pub fn warps(&self) -> u32 {
        self.threads / 32
    }

    /// Warpgroups of the team.
    pub fn warpgroups(&self) -> u32 {
        self.threads / 128
    }

    /// The CTA's warpgroup the team starts at.
    pub fn first_warpgroup(&self) -> u32 {
        self.index * self.warpgroups()
    }
}
