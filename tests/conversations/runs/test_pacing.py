"""The frame pacer: frames go out at once while the process has spare CPU; as it gets busy
the interval between a stream's frames doubles up to its bound, and falls back to zero."""

from __future__ import annotations

from conversations.runs.pacing import MAX_FRAME_INTERVAL, SAMPLE_SECONDS, FramePacer


class Clocks:
    """Wall and CPU time the test advances: ``cores`` of CPU per second of wall time."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0

    def advance(self, seconds: float, cores: float) -> None:
        self.wall += seconds
        self.cpu += seconds * cores


def pacer_with(clocks: Clocks) -> FramePacer:
    return FramePacer(clock=lambda: clocks.wall, cpu_clock=lambda: clocks.cpu)


def intervals(pacer: FramePacer, clocks: Clocks, cores: float, samples: int) -> list[float]:
    out = []
    for _ in range(samples):
        clocks.advance(SAMPLE_SECONDS * 1.01, cores)  # a sample due each time
        out.append(pacer.interval())
    return out


def test_with_spare_cpu_every_frame_goes_out_at_once() -> None:
    clocks = Clocks()
    pacer = pacer_with(clocks)
    assert intervals(pacer, clocks, cores=0.3, samples=5) == [0.0] * 5


def test_a_busy_process_spaces_frames_out_up_to_the_bound_then_recovers() -> None:
    clocks = Clocks()
    pacer = pacer_with(clocks)

    busy = intervals(pacer, clocks, cores=1.0, samples=8)
    assert busy[0] > 0 and busy == sorted(busy)  # grows while busy
    assert busy[-1] == MAX_FRAME_INTERVAL  # never past the bound

    steady = intervals(pacer, clocks, cores=0.6, samples=3)  # neither busy nor idle: held
    assert steady == [MAX_FRAME_INTERVAL] * 3

    idle = intervals(pacer, clocks, cores=0.1, samples=8)
    assert idle == sorted(idle, reverse=True) and idle[-1] == 0.0  # back to "at once"


def test_the_cpu_is_sampled_at_most_once_per_period() -> None:
    clocks = Clocks()
    pacer = pacer_with(clocks)
    clocks.advance(SAMPLE_SECONDS / 4, cores=2.0)  # a busy moment, too short to judge
    assert pacer.interval() == 0.0
