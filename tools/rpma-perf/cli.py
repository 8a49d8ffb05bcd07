# SPDX-License-Identifier: BSD-3-Clause
"""cli.py -- rpma-perf's command line, the one source of its --help, its option table and its man
page. mkcli.py writes tools/rpma-perf/cli.h (the help text and the getopt table) and
docs/man/man1/rpma-perf.1 from it; both are checked in, and the test rpma_perf_cli_generated fails
when they are not what mkcli.py makes.

Markup (as docs/man/pages.py): **X** bold, {x} italic, [[rpma_read]] a man page reference;
blank line: new paragraph; "- " lines a list; "= term" lines a tagged list; "$ " lines verbatim.
`text` is shown by --help and opens the man page's entry; `more` is for the man page only.
"""

DATE = "2026-11-25"

# Limits the help and the page state; cli.h asserts that perf.h agrees.
LIMITS = {"PERF_DEFAULT_PORT_NUM": 7204, "PERF_DEFAULT_REGION_MIB": 64, "PERF_MAX_IODEPTH": 1024,
          "PERF_MAX_CONNS": 64}

SUMMARY = "measure, soak-test and demonstrate rpma"

# (command, its arguments in the synopsis, text, more)
COMMANDS = [
    ("server", "[--addr A] [--port P] [--size BYTES] [--pmem FILE]",
     "Serve clients on {A} (default 0.0.0.0) and port {P} (default 7204) until interrupted "
     "(**SIGINT**, **SIGTERM**).",
     "Each connection gets a thread of its own. The region is {BYTES} long (default 64 MiB), "
     "anonymous memory or, with **--pmem**, a shared mapping of {FILE} (created or extended as "
     "needed), which persistent flushes make durable. It prints a line when it listens, one when "
     "a session starts and one when it ends (see **OUTPUT**)."),
    ("client", "--addr A --op OP [options]",
     "Connect to a server at {A} and run the operation {OP}.",
     "**--addr** and **--op** are required."),
    ("loopback", "--op OP [options]",
     "Run a server on 127.0.0.1 in a child process and the client against it.",
     "It reports as **client** does. If the port is taken the next ones are tried, up to 64. The "
     "region is sized for the connections, queue depth and operation size asked for."),
    ("tour", "[--time S] [--port P] [--json]",
     "A short overview over the loopback address, then a table of the results.",
     "The steps: write bandwidth (64 KiB, 32 in flight), write+flush latency (8 bytes), read "
     "bandwidth (64 KiB, 32 in flight) and read latency (8 bytes), each for {S} seconds "
     "(default 3)."),
    ("soak", "[--addr A] [--port P] [--time S] [options]",
     "Mixed writes, reads, flushes and atomic writes of random sizes at random offsets, every "
     "byte read checked against what was written; exits with 1 on any mismatch.",
     "Without **--addr** it starts its own server on 127.0.0.1; with it, it uses a running "
     "**rpma-perf server**. Defaults: 60 seconds, 4 connections, queue depth 8, operations up to "
     "64 KiB, a window of 4 MiB per connection, a status line every 10 seconds."),
]

# (operation, text)
OPERATIONS = [
    ("read", "[[rpma_read]] from the server's region."),
    ("write", "[[rpma_write]] to the server's region."),
    ("write-flush", "a write, then [[rpma_flush]] to visibility; the pair counts as one."),
    ("write-flush-persistent", "a write, then a persistent flush."),
    ("atomic-write", "[[rpma_atomic_write]], always 8 bytes."),
    ("send", "[[rpma_send]] into receives the server posts."),
    ("write-imm", "[[rpma_write_with_imm]]."),
    ("gpspm", "a write, then a flush request by [[rpma_send]] that the server's session thread "
     "answers by [[rpma_send]] after a memory fence (the region is DRAM or a shared file "
     "mapping); the latency is the round trip through the server's application thread."),
    ("send-recv", "{N} bytes by [[rpma_send]], answered by the server's session thread with the "
     "same bytes, which the client checks."),
]

# (short, long, argument or None, text, more)
OPTIONS = [
    ("a", "addr", "A", "The address to listen on (server) or connect to (client, soak).", ""),
    ("p", "port", "P", "The port, 1 to 65535; default 7204.", ""),
    ("o", "op", "OP", "The operation (see **OPERATIONS**).", ""),
    ("s", "size", "N",
     "Bytes per operation (default 4096; atomic-write always moves 8). Server: the size of its "
     "region (default 64 MiB). Soak: the largest operation (default 64 KiB).", ""),
    ("d", "iodepth", "D", "Operations in flight per connection, 1 to 1024; default 1 (soak: 8).",
     ""),
    ("c", "connections", "N", "Connections, one thread each, 1 to 64; default 1 (soak: 4).", ""),
    ("t", "time", "S", "Run {S} seconds; default 5 (tour: 3 per step, soak: 60).", ""),
    ("n", "count", "N", "Run {N} operations per connection instead; not with **--time**, not for "
     "soak.", ""),
    ("b", "busy-poll", None,
     "Spin on [[rpma_cq_get_wc]] instead of sleeping in [[rpma_cq_wait]].", ""),
    ("M", "server-mode", "wait|poll",
     "gpspm, send-recv: the server's session thread waits in [[rpma_cq_wait]] (**wait**) or "
     "spins on [[rpma_cq_get_wc]] (**poll**); default: as the client.",
     "The client tells the server when it connects; **poll** with **--busy-poll**, else "
     "**wait**."),
    ("P", "provider", "tcp|shm|verbs|auto",
     "Set **RPMA_PROVIDER** for this process and the server it forks, before the first librpma "
     "call; **auto** unsets it, so librpma chooses. Default: the environment as it is.",
     "When librpma lacks the provider that **RPMA_PROVIDER** names, rpma-perf says so and exits "
     "with 1. The JSON output names the provider in effect (**auto** when none is forced)."),
    ("C", "clock", "auto|tsc|monotonic",
     "The clock that times each operation: **tsc**, the CPU's time stamp counter (x86), or "
     "**monotonic**, **CLOCK_MONOTONIC**; **auto** (the default) takes the counter where the "
     "kernel reports it invariant.",
     "The counter is read on **CLOCK_MONOTONIC**'s time line at a rate measured against it for "
     "50 ms at start. Where the kernel's clock source is slow to read (an emulated HPET in a "
     "virtual machine, several microseconds), one read per operation is part of every figure; "
     "perftest times with the counter. The JSON output names the clock in **clock** and gives "
     "the run's span by **CLOCK_MONOTONIC** as **seconds_monotonic**, beside **seconds**."),
    ("j", "json", None, "Print one JSON object (tour: an array of them) instead of the report.",
     ""),
    ("f", "pmem", "FILE", "Server, loopback, soak: map {FILE} (created if needed) instead of "
     "anonymous memory.", ""),
    ("i", "interval", "S", "Soak: seconds between status lines; default 10.", ""),
    ("S", "seed", "X", "Soak: the seed of the random operations; default from the clock.", ""),
    ("w", "window", "BYTES", "Soak: the bytes of the region each connection works in, at least "
     "64; default 4 MiB.", ""),
    ("v", "verbose", None, "Accepted for older scripts; the server always reports.", ""),
    ("V", "version", None, "Print the version and exit.", ""),
    ("h", "help", None, "Print this summary and exit.", ""),
]

# after the options, in --help and in the man page
SIZES = ("Sizes and counts take the suffixes K, M and G (powers of 1024), optionally followed by "
         "i and B, as in 64KiB. The operation size times the queue depth may not exceed 4 GiB.")

# the man page only
DESCRIPTION = """\
**rpma-perf** drives the librpma interface, and nothing else, over the network or the loopback
address. A server exposes one memory region that may be read, written and flushed to
persistence; a client drives one kind of operation over one or more connections and reports
bandwidth, operations per second, latency percentiles and the CPU time of both sides. Every byte
read is compared with what the server's region holds, and what a writer wrote is read back at the
end, so a lost or misplaced write shows up."""

OUTPUT = """\
The report names the operation, its size, the queue depth, the connections and the mode
(blocking or busy-poll; for gpspm and send-recv also whether the server waits or busy-polls),
then the number of operations and the time, the bandwidth, the operations per second, the latency
percentiles (p50, p99, p99.9, maximum, mean; with a queue depth above 1 they include the time
spent waiting behind the queue), the CPU time of client and server, and the result of the data
check. When standard error is a terminal and **--json** is not given, a progress line is shown
while the client runs.

The server prints a line when a session starts and one when it ends: its time, the server's CPU
time and what the server saw, which depends on the operation: the messages received (send,
write-imm), the requests answered (gpspm, send-recv), or nothing for one-sided operations (read,
write, flushes, atomic write), which the library serves without the program. Counts include the
client's warm-up. A session whose client left before the end of its run, and a completion that
failed for another reason than the connection's end, get a line on standard error.

An error is one line that says what failed and why, in the words of librpma's log (for example
**rpma-perf server: cannot listen on 127.0.0.1:7204: Address already in use**)."""

EXIT_STATUS = """\
0 on success, 2 for a usage error, and 1 (or another non-zero value) when the run failed, the
data check failed, or the loopback server did not start or exited with an error."""

ENVIRONMENT = """\
The variables of [[librpma]] apply, for example **RPMA_PROVIDER** (see **--provider**). With
**RPMA_LOG_LEVEL_AUX** set, the library's own messages go to standard error in its format, as
asked, and the error lines give only the error code's text."""

EXAMPLES = [
    "rpma-perf tour",
    "rpma-perf loopback --op write-flush --size 64 --time 10",
    "rpma-perf loopback --op gpspm --size 8 --busy-poll --server-mode wait",
    "rpma-perf server --pmem /mnt/pmem/rpma.pool --size 1G",
    "rpma-perf client --addr 192.0.2.1 --op read --size 64K --iodepth 32 --connections 4",
    "rpma-perf soak --time 600",
    "rpma-perf loopback --provider shm --op write --size 1M --iodepth 32",
]

SEE_ALSO = ["librpma", "rpma_cq_get_wc", "rpma_cq_wait", "rpma_flush", "rpma_read", "rpma_send",
            "rpma_write"]
