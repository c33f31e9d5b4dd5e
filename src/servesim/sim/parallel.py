"""Run independent tasks serially, on local processes, or on a Ray cluster.

``map_tasks(fn, args, jobs=1, ray_address=None)`` returns ``[fn(*a) for a in
args]`` in order, whichever way it runs, so results never depend on the
executor.  ``fn`` must be a module-level function (picklable).  Ray is an
optional extra (``pip install 'servesim[ray]'``), imported only when asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from servesim._checks import ParameterError, check_int

__all__ = ["map_tasks"]

T = TypeVar("T")


def map_tasks(
    fn: Callable[..., T],
    args: Sequence[tuple[Any, ...]],
    *,
    jobs: int = 1,
    ray_address: str | None = None,
    progress: Callable[[], None] | None = None,
) -> list[T]:
    """``[fn(*a) for a in args]``, in order; ``progress()`` after each task finishes."""
    check_int("jobs", jobs, lo=1)
    tick = progress or (lambda: None)
    if ray_address is not None:
        return _ray_map(fn, args, ray_address, tick)
    if jobs == 1 or len(args) <= 1:
        out = []
        for a in args:
            out.append(fn(*a))
            tick()
        return out
    with ProcessPoolExecutor(max_workers=min(jobs, len(args))) as pool:
        futures = [pool.submit(fn, *a) for a in args]
        results = []
        for f in futures:
            results.append(f.result())
            tick()
        return results


def _ray_map(fn: Callable[..., T], args: Sequence[tuple[Any, ...]], address: str,
             tick: Callable[[], None]) -> list[T]:
    try:
        import ray
    except ImportError:
        raise ParameterError("ray_address", address,
                             "usable only with Ray installed (pip install 'servesim[ray]')") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(fn)
        refs = [remote.remote(*a) for a in args]
        results: list[T] = []
        for r in refs:
            results.append(ray.get(r))
            tick()
        return results
    finally:
        if started:
            ray.shutdown()
