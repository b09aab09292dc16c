// Schedules for the memory model (memory_model.h): the rotation policy of policies/rotation.h
// turned into a step order, the thesis-shaped example, and generated cases for the search.
#pragma once

#include <cstdint>

#include "gpushare/policies/rotation.h"
#include "memory_model.h"

namespace gpushare::sim {

// The step order gpushared would produce with `parameters`: at each turn decide_rotation says who
// runs; the head job runs ceil(turn / (compute + idle)) steps (at least one), the other jobs of
// the resident set as many as fit in the same turn, interleaved; then the turn passes on. Jobs
// that finish leave the rotation; once the rest fit, they run interleaved to the end.
StepOrder rotation_schedule(const MemoryCase& memory_case,
                            const policies::RotationParameters& parameters);

// Parameters for the thesis's setting: a turn is one step (no minimum, no swap-in multiple).
policies::RotationParameters one_step_turns(policies::RotationOrder order, bool prefetch);

// A case of the shape of the thesis's example (its data survives only as pictures): four clients
// A-D that copy their working set in before each computation, two steps each, one copy engine,
// one compute engine, room for about two working sets, and weights D > C > A > B as in the
// thesis, so the weight order is its D, B, C, A. Times are in units (bandwidth 1 MiB per unit).
MemoryCase thesis_shaped_case();

// A random case: `jobs` jobs with compute 1-10 s per step, idle 0-100 % of it, working sets
// 2-8 GiB at 1 GiB/s (so copies take as long as computes), 2-4 steps, and a capacity left by
// production of 1/1.5 to 1/2 of their total (never less than the largest). Deterministic in `seed`.
MemoryCase generated_case(uint64_t seed, size_t jobs);

}  // namespace gpushare::sim
