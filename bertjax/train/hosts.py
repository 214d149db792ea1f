r"""Several joined processes ("hosts") of one command on this machine, watched: when one dies,
the others are stopped and one line says so.

    python -m bertjax.train.hosts --num_processes=2 -- \
        python -m bertjax.main --gin_file=... --model_dir=DIR --mode=train

starts the command once per host, each with `--coordinator_address=127.0.0.1:PORT
--num_processes=N --process_id=I` appended (`train.distributed` joins them), all writing to
this terminal. Why a parent: JAX's coordination service notices a dead process only after its
heartbeat timeout, and the survivors then abort (status 134) logging that "tasks are
unhealthy", without a word about which host died or what to do; a Python callback for it
cannot be given to JAX's runtime client (it fails with std::bad_cast). The parent sees a death
at once: it stops the other hosts (SIGKILL: without the dead one they can neither train nor
save) and prints

    bertjax.train.hosts: host 1 of 2 (pid P) died (killed by SIGKILL); stopped the other
    hosts (0). Run the same command again: the run resumes from its last sealed checkpoint.

Its own exit status is the dead host's (128 + N for signal N). SIGTERM / SIGINT sent to it go
to every host once (a preemption: they agree on a step, save it and exit 143 / 130, which is
then its status too); a host that ends with an error of its own (bad flags) is reported the
same way, its output above saying why.
"""
import argparse
import signal
import socket
import subprocess
import sys
import time

PREFIX = "bertjax.train.hosts"


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _how(returncode: int) -> str:
  if returncode < 0:
    return f"killed by {signal.Signals(-returncode).name}"
  return f"exit status {returncode}"


def _status(returncode: int) -> int:
  """A Popen return code as a shell reports it (a signal N is 128 + N)."""
  return 128 - returncode if returncode < 0 else returncode


def _say(message: str) -> None:
  print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)


def run(command: list[str], num_processes: int, port: int | None = None,
        poll_s: float = 0.1) -> int:
  """Runs `command` as `num_processes` joined hosts until they all end, or one fails (see
  the module docstring); returns the exit status for the whole run."""
  if num_processes < 1:
    raise ValueError(f"--num_processes={num_processes}: must be >= 1.")
  if not command:
    raise ValueError("no command: give it after `--`, e.g. -- python -m bertjax.main ...")
  port = port or free_port()
  hosts = []
  forwarded = []  # the signal sent on to every host, once

  def forward(signum, frame):
    del frame
    if not forwarded:
      forwarded.append(signum)
      for host in hosts:
        if host.poll() is None:
          host.send_signal(signum)

  previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT)}
  try:
    for i in range(num_processes):
      # A session of its own: a terminal's Ctrl-C reaches the hosts once, through `forward`.
      hosts.append(subprocess.Popen(
          [*command, f"--coordinator_address=127.0.0.1:{port}",
           f"--num_processes={num_processes}", f"--process_id={i}"], start_new_session=True))
    _say(f"started {num_processes} hosts joined at 127.0.0.1:{port}: " +
         ", ".join(f"host {i} pid {h.pid}" for i, h in enumerate(hosts)) + ".")
    return _watch(hosts, forwarded, poll_s)
  finally:
    for host in hosts:  # never leave a host behind (the parent was interrupted)
      if host.poll() is None:
        host.kill()
        host.wait()
    for signum, handler in previous.items():
      signal.signal(signum, handler)


def _watch(hosts: list[subprocess.Popen], forwarded: list[int], poll_s: float) -> int:
  while True:
    codes = [h.poll() for h in hosts]
    if all(c is not None for c in codes):
      failed = [c for c in codes if c != 0]
      return _status(failed[0]) if failed else 0
    dead = next((i for i, c in enumerate(codes) if c not in (None, 0)), None)
    if dead is not None and not forwarded:  # (after a forwarded signal, exits are expected)
      others = [i for i, c in enumerate(codes) if c is None]
      for i in others:
        hosts[i].kill()
      for i in others:
        hosts[i].wait()
      _say(f"host {dead} of {len(hosts)} (pid {hosts[dead].pid}) died ({_how(codes[dead])}); "
           f"stopped the other hosts ({', '.join(map(str, others))}). Run the same command "
           "again: the run resumes from its last sealed checkpoint.")
      return _status(codes[dead])
    time.sleep(poll_s)


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  own, command = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (
      argv, [])
  parser = argparse.ArgumentParser(prog=f"python -m {PREFIX}", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--num_processes", type=int, required=True, help="hosts to start")
  parser.add_argument("--port", type=int, default=None,
                      help="the coordinator's port on 127.0.0.1 (default: a free one)")
  args = parser.parse_args(own)
  try:
    return run(command, args.num_processes, args.port)
  except ValueError as e:
    parser.error(str(e))


if __name__ == "__main__":
  sys.exit(main())
