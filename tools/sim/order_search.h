// A genetic search for a step order (research/thesis-oversubscription-scheduling.md, "Solution"),
// the baseline the weight order is measured against.
//
// A candidate is an order of the nodes of the case's DAG: node (job j, step k) must come after
// (j, k-1). Each generation: every candidate is simulated with prefetch (memory_model.h) and
// scored by its makespan; the best `survivors` are kept (truncation selection, so the best found
// is never lost); children are made from two survivors picked at random by the thesis's order
// crossover (a random crossover point CR, the first CR nodes of one parent, then the missing
// nodes in the other parent's order: a prefix of a topological order followed by the rest in a
// topological order is one); each child is mutated with probability `mutation_rate` by moving one
// node to a random position between its predecessor and its successor, so it stays topological.
// The initial population is `seeds` (e.g. the weight order) plus random topological orders. All
// randomness comes from one std::mt19937_64 seeded with `seed`, reduced with `%` (the standard
// distributions differ between libraries), so a search is the same everywhere.
#pragma once

#include <cstdint>
#include <vector>

#include "memory_model.h"

namespace gpushare::sim {

struct SearchParameters {
  size_t population = 40;
  size_t survivors = 20;
  size_t generations = 150;
  double mutation_rate = 0.3;
  uint64_t seed = 1;
  std::vector<StepOrder> seeds;  // put into the first population as they are
};

struct SearchResult {
  StepOrder best;
  double best_makespan_s = 0;
  uint64_t evaluations = 0;  // schedules simulated
};

SearchResult search_order(const MemoryCase& memory_case, const SearchParameters& parameters);

}  // namespace gpushare::sim
