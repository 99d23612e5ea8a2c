"""The standard jobs and how they run: the wiring the app calls to give the scheduler its real handlers.

Each learning-loop step (reflection, consolidation, forgetting) is written as a *step function*: given the
job's payload and the state so far, it does one small batch and returns the new state. `stepwise` turns it
into a cooperative handler that checkpoints after every batch and yields between batches.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from core.errors import GenerationStopped
from core.scheduler import YIELDED, JobContext, JobSpec

REFLECTION, CONSOLIDATION, FORGETTING, FINETUNE = "reflection", "consolidation", "forgetting", "finetune"
DAY = 86400.0
# How often the routine jobs are queued; reflection is queued when a session ends instead.
ROUTINE_INTERVALS = {CONSOLIDATION: DAY, FORGETTING: DAY, FINETUNE: DAY}


@dataclass(frozen=True)
class Step:
    """One batch done: the state to resume from, how far along, and whether the job is finished."""

    state: Mapping[str, Any] = field(default_factory=dict)
    fraction: float = 0.0
    message: str = ""
    done: bool = False


StepFunction = Callable[[Mapping[str, Any], Mapping[str, Any]], Step]  # (payload, state) -> Step
Handler = Callable[[JobContext], Any]


def stepwise(step: StepFunction) -> Handler:
    """A handler that runs `step` batch by batch, saving a checkpoint after each one and stopping
    between batches when the scheduler asks it to yield — or inside one, when a step's model generation gave way
    (GenerationStopped): that batch wrote nothing yet and is done again from the last checkpoint."""
    def handler(ctx: JobContext) -> Optional[str]:
        state: Mapping[str, Any] = dict(ctx.resume or {})
        while True:
            if ctx.should_yield():
                return YIELDED
            try:
                result = step(ctx.payload, state)
            except GenerationStopped:
                return YIELDED
            state = dict(result.state)
            ctx.checkpoint(state)
            ctx.progress(result.fraction, result.message)
            if result.done:
                return None
    return handler


def standard_specs(*, reflect: Optional[Handler] = None, consolidate: Optional[Handler] = None,
                   forget: Optional[Handler] = None, finetune: Optional[Handler] = None) -> list[JobSpec]:
    """The four job kinds with their conditions; a kind whose handler is not given is left out."""
    specs = []
    if reflect is not None:
        specs.append(JobSpec(REFLECTION, reflect, heavy=True, uses_model=True, needs_power=False))
    if consolidate is not None:
        specs.append(JobSpec(CONSOLIDATION, consolidate, heavy=True, uses_model=True))
    if forget is not None:
        specs.append(JobSpec(FORGETTING, forget, heavy=False, uses_model=False))
    if finetune is not None:
        specs.append(JobSpec(FINETUNE, finetune, heavy=True, uses_model=True, quiet_hours_only=True,
                             max_attempts=2, retry_after_seconds=3600.0))
    return specs
