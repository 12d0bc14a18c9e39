"""An intent: what the workload needs, with its scope, how sure we are, and why."""

from __future__ import annotations

import math

import msgspec

from scrtune.goodput.intervals import daly
from scrtune.intents.inputs import SystemProfile, WorkloadStats


class Intent(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    scope: str  # "process", "node" or "job"
    confidence: float  # 0 (nothing to go on) .. 1 (measured)
    evidence: tuple[str, ...]
    value: object  # the intent's own frozen Struct; scr_config maps it to parameters


def nodes(stats: WorkloadStats, profile: SystemProfile) -> int:
    return max(profile.nodes, stats.hosts, 1)


def ranks_per_node(stats: WorkloadStats, profile: SystemProfile) -> int:
    return profile.ranks_per_node or traced_ranks_per_node(stats)


def traced_ranks_per_node(stats: WorkloadStats) -> int:
    """The ranks on each of the trace's hosts."""
    return max(1, math.ceil(stats.ranks / max(stats.hosts, 1)))


def files_per_rank(stats: WorkloadStats) -> float:
    return stats.ckpt_files / max(stats.ranks, 1) if stats.ckpt_files else 0.0


def transfer_threads(stats: WorkloadStats, profile: SystemProfile) -> int:
    """AXL's PTHREAD flush: min(online CPUs, 16, files of the rank) threads per rank."""
    return max(1, min(profile.cores_per_node, 16, math.ceil(files_per_rank(stats)) or 1))


def flush_s(stats: WorkloadStats, profile: SystemProfile) -> float:
    """One checkpoint's flush at the planned node count: each node flushes the trace's bytes per
    host at its share of the flush bandwidth (SCR's own when the profile is calibrated, else the
    parallel tier's, scaled per doubling with the nodes). 0 without a flush bandwidth."""
    share = profile.flush_node_bytes_per_s(nodes(stats, profile))
    if share <= 0 or stats.ckpt_bytes <= 0:
        return 0.0
    return busiest_node_bytes(stats, profile) / share


def busiest_node_bytes(stats: WorkloadStats, profile: SystemProfile) -> float:
    """A checkpoint's bytes on the node of the busiest rank: it finishes its writes, encode
    and flush last, and SCR_Complete_output waits for every rank (the study's model, issue 48:
    the mean rank was modelled)."""
    return max(stats.ckpt_bytes / max(stats.hosts, 1),
               stats.busiest_rank_bytes * ranks_per_node(stats, profile))


MIN_SECONDS = 1
# SCR_CHECKPOINT_SECONDS at most: a day. Beyond it a failure is so rare that the expected waste
# is flat, and one crash would lose more than a day of work
MAX_SECONDS = 86_400


def recommended_interval_s(optimum_s: float) -> float:
    """The compute between checkpoints the job will see: the interval the recommendation sets
    (Daly's optimum, as SCR_CHECKPOINT_SECONDS within MIN_SECONDS..MAX_SECONDS), which
    `need_checkpoint()` and TunedSCR's cadence follow. Flush cadence, redundancy and waste are
    all weighed at it, not at the trace's own cadence: a flush every 10th checkpoint chosen for
    a trace's 3.6 s would leave the parallel file system's copy 31 h behind at a 3.1 h
    interval (issue 48). The trace's own cadence is what the job did before it followed the
    recommendation."""
    return float(min(MAX_SECONDS, max(MIN_SECONDS, round(optimum_s))))


MIN_GAP_S = 1e-3  # a job that keeps its cadence computes at least this long between checkpoints


# a job's own steps vary: the compute gap a trace measured is their mean, so a cadence set
# for a job that keeps its gap leaves this share of it for the shorter ones
KEPT_GAP_SLACK = 0.1


def kept_cadence_seconds(gap_s: float) -> int:
    """SCR_CHECKPOINT_SECONDS for a job that keeps its own compute gap of `gap_s`: whole
    seconds within it. SCR_Need_checkpoint says yes once the seconds since the last checkpoint
    ended, cut to a whole number, reach the setting (scr.c, v3.1.0), so a job that asks at its
    own cadence is told yes at each of its checkpoints only when the setting is at most its
    gap (issue 48: a 1.5 s gap rounded to 2 s was told yes every other step). A gap under
    MIN_SECONDS cannot be followed: yes every ceil(1 / gap)-th checkpoint."""
    return int(min(MAX_SECONDS, max(MIN_SECONDS, math.floor(gap_s * (1 - KEPT_GAP_SLACK)))))


def compute_gap_s(stats: WorkloadStats, profile: SystemProfile, cost_s: float) -> float:
    """The compute between two checkpoints that flush cadence, redundancy and waste are weighed
    at. A job that checkpoints on its own cadence (every N steps; `job_interval_s`, start to
    start, as `recommend --job-interval-s` says) keeps its compute gap whatever SCR is set to:
    a configuration that checkpoints 1 s slower costs 1 s of every interval, not a longer
    interval. A job that asks SCR_Need_checkpoint follows the interval the recommendation sets,
    Daly's optimum for a checkpoint of `cost_s`."""
    if stats.job_interval_s > 0:
        return kept_gap_s(stats)
    mtbf = profile.node_mtbf_s / nodes(stats, profile)
    return recommended_interval_s(daly(max(cost_s, 1e-3), mtbf))


def kept_gap_s(stats: WorkloadStats) -> float:
    """The compute between checkpoints of a job that keeps its own cadence (its interval less
    the trace's checkpoint, which its steps do not shorten); 0 for a job that follows the
    recommended interval."""
    if stats.job_interval_s <= 0:
        return 0.0
    return max(stats.job_interval_s - stats.ckpt_dur_s, MIN_GAP_S)


MAX_FLUSH_EVERY = 10  # SCR's own default SCR_FLUSH: the furthest the PFS copy may fall behind


def flush_every(stats: WorkloadStats, profile: SystemProfile, cadence_s: float,
                fatal_share: float | None = None) -> int:
    """Flush every k-th checkpoint, k weighing what flushing costs against what a failure the
    cache cannot recover from costs when the newest copy on the parallel file system is k
    checkpoints behind: per second, F / (k s) of flushing (at most; an asynchronous flush
    blocks less) against l ((k-1)/2 + 1) s of lost work, s the checkpoint segment, l the rate
    of those failures: `fatal_share` of the job's failures (the redundancy scheme's, issue 48:
    with PARTNER only a loss of both partners before the rebuild needs the parallel file
    system's copy; default every failure that loses node storage, as SINGLE's). Minimised at
    k = sqrt(2 F / (l s^2)), within 1 .. MAX_FLUSH_EVERY, and never more than MAX_SECONDS (a
    day) of segments: failures the model does not weigh (a whole system's or its file
    system's outage) take every node's cache at once. Rare fatal losses and a job that
    checkpoints often flush rarely; frequent ones, every checkpoint."""
    flush = flush_s(stats, profile)
    if flush <= 0:
        return 1
    share = profile.node_loss_share if fatal_share is None else fatal_share
    segment = cadence_s + max(stats.ckpt_dur_s, 0.0)
    loss_rate = share * nodes(stats, profile) / profile.node_mtbf_s
    risk = loss_rate * segment * segment  # may underflow to 0 for a share like 1e-313
    best = math.sqrt(2 * flush / risk) if risk > 0 else math.inf
    most = max(1, min(MAX_FLUSH_EVERY, int(MAX_SECONDS // segment))) if segment > 0 \
        else MAX_FLUSH_EVERY
    return most if not best < most else max(1, round(best))


def mib(count: float) -> str:
    return f"{count / (1 << 20):,.1f} MiB"
