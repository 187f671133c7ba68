/*
 * watchdog.h -- the memory watchdog: one timer on the loop for every run
 * that needs it, summing the resident memory of each run's process tree.
 *
 * It is a fallback and says so: a tree can overshoot its limit between two
 * samples.  It never starts a process: each member's /proc/PID/statm is kept
 * open and read with pread(), and the tree is found again from /proc as it
 * changes.  lib/watchdog.c implements it.
 */
#ifndef SBX_WATCHDOG_H
#define SBX_WATCHDOG_H

#include <stdint.h>
#include <sys/types.h>

struct event_base;
struct sbx__watchdog;
struct sbx__wd_entry;

/* A watchdog on |base| sampling every |interval| seconds (0: 0.25 s). NULL: ENOMEM. */
struct sbx__watchdog *sbx__watchdog_new(struct event_base *base, double interval);
/* Frees it; every entry must have been removed. */
void sbx__watchdog_free(struct sbx__watchdog *wd);

/*
 * Watches the tree rooted at |root| (our child).  When its resident memory
 * exceeds |limit| bytes, |over| is called once, from the loop, with |arg|.
 * The timer runs only while there are entries.
 */
struct sbx__wd_entry *sbx__watchdog_add(struct sbx__watchdog *wd, pid_t root, uint64_t limit,
                                        void (*over)(void *arg), void *arg);
/* Stops watching (also from inside |over|); closes what the entry held. */
void sbx__watchdog_remove(struct sbx__watchdog *wd, struct sbx__wd_entry *e);
/* The highest sum seen so far, in bytes; -1 before the first sample. */
int64_t sbx__watchdog_peak(const struct sbx__wd_entry *e);

/*
 * Added for tests and bench/watchdog (not part of the original contract).
 * Counters since sbx__watchdog_new(); a "scan" is one pass over /proc.
 */
struct sbx__wd_stats {
	uint64_t ticks;         /* timer callbacks */
	uint64_t scans_full;    /* scans that read the stat of every process not yet a member */
	uint64_t scans_new;     /* scans that read only processes created since the last scan */
	uint64_t scans_skipped; /* ticks that needed no scan: no process had been created */
	uint64_t stat_reads;    /* /proc/PID/stat files read by scans */
	uint64_t probes;        /* pids looked up by number rather than listed */
	uint64_t samples;       /* statm reads */
	uint64_t adopted;       /* members found by scans (roots not counted) */
	uint64_t departed;      /* members (roots included) found gone */
};
/* Copies the counters of |wd| into |out|. */
void sbx__watchdog_stats(const struct sbx__watchdog *wd, struct sbx__wd_stats *out);
/* When /proc is scanned for new members (lib/watchdog.c says why). */
enum sbx__wd_schedule {
	SBX__WD_GATED = 0,  /* the default: only when /proc/loadavg shows new pids */
	SBX__WD_PLAIN,      /* as without a usable loadavg: every tick while a tree is
	                       young or changed, else every 4th; every scan full */
	SBX__WD_EVERY_TICK, /* a full scan on every tick */
};
/* For tests and benchmarks: another schedule. */
void sbx__watchdog_set_schedule(struct sbx__watchdog *wd, enum sbx__wd_schedule s);

#endif /* SBX_WATCHDOG_H */
