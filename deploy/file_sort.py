"""Sort a file of Sort Benchmark records with dsort's Python API, :func:`dsort.service.sort_files`,
on a running cluster: the compose deployment's (its TLS address and certificate directory), or
else a LocalCUDACluster started here (a LocalCluster of CPU workers without a GPU, saying so).
Start from it:

    python deploy/file_sort.py                     # a cluster of its own, the files in a temporary directory
    python deploy/file_sort.py --scheduler tls://scheduler:8786 --tls /tls --dir /data   # in the client container

The workers read INPUT and write OUTPUT themselves: ``--dir`` must be where they see it under the
same path (the compose file's /data).
"""

import argparse
import contextlib
import shutil
import tempfile
from pathlib import Path

from distributed import Client

from dsort.io import gen
from dsort.cluster import local_cuda_cluster
from dsort.service import format_report, sort_files


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", type=float, default=1e6, help="records of 100 bytes (default 1e6)")
    p.add_argument("--scheduler", help="a running cluster, e.g. tls://scheduler:8786 (default: a LocalCUDACluster of its own)")
    p.add_argument("--tls", metavar="DIR", help="for a tls:// scheduler: the directory dsort tls made")
    p.add_argument("--dir", help="where the input and output go, seen by every worker (default: a temporary directory)")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="dsort-file-sort-", dir=args.dir))
    with contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, work, ignore_errors=True)
        src, dst = work / "input.bin", work / "sorted.bin"
        gen.records(int(args.n), src)
        if args.scheduler:  # the service connects, and closes its client afterwards
            where = dict(scheduler=args.scheduler, security=args.tls)
        else:
            cluster = stack.enter_context(local_cuda_cluster())
            where = dict(client=stack.enter_context(Client(cluster)))
        report = sort_files(src, dst, **where)  # checks the output's count, checksum and order itself
        print(format_report(report))
        print(f"OK: {report.records:,} records sorted and checked")


if __name__ == "__main__":
    main()
