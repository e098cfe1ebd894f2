"""The umbrella's side of the stages' event hook: the same `emit`/`stage`/`on` the stage
packages use (see ember_events for the contract: the `ember.events` logger,
DEBUG meaning on, the `ember_event`/`ember_payload` record attributes). The umbrella may
import a stage, so it reuses the tracer's copy instead of keeping a fourth."""

from __future__ import annotations

from ember_events import emit, on, stage

__all__ = ["emit", "on", "stage"]
