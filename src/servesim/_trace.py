"""What every floor may know of a request trace: :class:`TraceRecord`, one element per request in
arrival order.  :class:`servesim.inputs.traces.TraceArrays` has it; :mod:`servesim.sim.replay`
replays it and :func:`servesim.render.simfigures.plot_trace` draws it, neither importing the other
floors (a protocol in the base, so one description serves all three)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # pragma: no cover - annotations only: the base imports no numpy
    import numpy as np
    import numpy.typing as npt

__all__ = ["TraceRecord"]


class TraceRecord(Protocol):
    """A trace's requests as arrays (arrival times in seconds from the first, token counts), with
    the file it came from, its format and whether it says how many prompt tokens a prefix cache held."""

    @property
    def path(self) -> str: ...
    @property
    def format(self) -> str: ...
    @property
    def requests(self) -> int: ...
    @property
    def has_prefix_info(self) -> bool: ...
    @property
    def arrival_s(self) -> npt.NDArray[np.float64]: ...
    @property
    def prompt_tokens(self) -> npt.NDArray[np.int64]: ...
    @property
    def output_tokens(self) -> npt.NDArray[np.int64]: ...
    @property
    def cached_prompt_tokens(self) -> npt.NDArray[np.int64]: ...
