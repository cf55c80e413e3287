// bomb.c: the fork bomb of proctest's "bomb" helper, in C so that a
// process of the bomb costs a fork (about 100 KiB) instead of a Go runtime
// (several threads and megabytes; far more under -race). It follows bomb.c
// of the research notes, section 9, and the Go fallback in bomb_unix.go:
//
//   bomb plain|setsid|dfork <budget|->
//
// The deadline is CORRAL_TEST_DEADLINE (CLOCK_MONOTONIC nanoseconds), set by
// the Go helper that execs this program, and inherited through fork. With a
// budget the tree has exactly that many processes if every fork succeeds;
// with "-" every process forks until the deadline. The root prints
// "ready <n>" once it started its first n children (all of its share with a
// budget, the first one without). Every process exits 0
// at the deadline.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { width = 4 };
static long long deadline;
static const char *mode;

static long long now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void pause_ns(long long ns) {
	struct timespec t = {ns / 1000000000LL, ns % 1000000000LL};
	nanosleep(&t, NULL);
}

static void sleep_to_deadline(void) {
	for (;;) {
		long long left = deadline - now();
		if (left <= 0)
			_exit(0);
		pause_ns(left);
	}
}

static void node(long budget, int root);

// fork_retry forks, backing off from 1 ms to 100 ms while fork fails
// (pids.max); it returns -1 once the deadline passed.
static pid_t fork_retry(void) {
	long long backoff = 1000000;
	for (;;) {
		if (now() >= deadline)
			return -1;
		pid_t p = fork();
		if (p >= 0)
			return p;
		pause_ns(backoff);
		backoff = backoff * 2 > 100000000 ? 100000000 : backoff * 2;
	}
}

// spawn starts one child that runs node(budget); 0 when the deadline passed.
static int spawn(long budget) {
	pid_t p = fork_retry();
	if (p < 0)
		return 0;
	if (p > 0)
		return 1;
	if (strcmp(mode, "plain") != 0)
		setsid();
	if (strcmp(mode, "dfork") == 0) {
		pid_t q = fork_retry(); // the middle process exits; its child is reparented
		if (q != 0)
			_exit(0);
	}
	node(budget, 0);
	_exit(0);
}

static void node(long budget, int root) {
	if (budget < 0) {
		// The root announces its first child: its children fill pids.max
		// within microseconds, after which its own forks may never succeed.
		for (int started = 0;; started++) {
			if (root && started == 1) {
				printf("ready %d\n", started);
				fflush(stdout);
			}
			if (!spawn(-1))
				_exit(0);
		}
	}
	long rest = budget - 1; // one process of the budget is this one
	long k = rest < width ? rest : width;
	int started = 0;
	for (long i = 0; i < k; i++) {
		long share = rest / k + (i < rest % k ? 1 : 0);
		if (!spawn(share))
			break;
		started++;
	}
	if (root) {
		printf("ready %d\n", started);
		fflush(stdout);
	}
	sleep_to_deadline();
}

int main(int argc, char **argv) {
	const char *d = getenv("CORRAL_TEST_DEADLINE");
	if (argc != 3 || d == NULL) {
		fprintf(stderr, "usage: CORRAL_TEST_DEADLINE=ns bomb plain|setsid|dfork <budget|->\n");
		return 2;
	}
	deadline = atoll(d);
	mode = argv[1];
	signal(SIGCHLD, SIG_IGN); // the kernel reaps exited children and dfork middles
	node(strcmp(argv[2], "-") == 0 ? -1 : atol(argv[2]), 1);
	return 0;
}
