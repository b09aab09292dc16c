// The genetic search of order_search.h: a candidate is a vector of node ids, node = first node of
// its job + step number; the helpers below make, cross and mutate such vectors, and search_order
// composes them into generations.
#include "order_search.h"

#include <algorithm>
#include <random>
#include <utility>

namespace gpushare::sim {
namespace {

using Genome = std::vector<uint32_t>;

struct Dag {
  std::vector<uint32_t> first;  // per job: its step 0's node
  std::vector<size_t> job;      // per node
  std::vector<uint32_t> step;   // per node
  std::vector<uint32_t> steps;  // per job
};

Dag make_dag(const MemoryCase& memory_case) {
  Dag dag;
  for (size_t j = 0; j < memory_case.jobs.size(); ++j) {
    dag.first.push_back(static_cast<uint32_t>(dag.job.size()));
    dag.steps.push_back(memory_case.jobs[j].steps);
    for (uint32_t k = 0; k < memory_case.jobs[j].steps; ++k) {
      dag.job.push_back(j);
      dag.step.push_back(k);
    }
  }
  return dag;
}

Genome to_genome(const Dag& dag, const StepOrder& order) {
  std::vector<uint32_t> next(dag.first.size(), 0);
  Genome genome;
  for (size_t job : order) genome.push_back(dag.first[job] + next[job]++);
  return genome;
}

StepOrder to_order(const Dag& dag, const Genome& genome) {
  StepOrder order;
  for (uint32_t node : genome) order.push_back(dag.job[node]);
  return order;
}

size_t below(std::mt19937_64& random, size_t n) {
  return static_cast<size_t>(random() % n);
}

// A random topological order: the jobs' steps shuffled as a multiset, then numbered in turn.
Genome random_genome(const Dag& dag, std::mt19937_64& random) {
  StepOrder order;
  for (size_t j = 0; j < dag.steps.size(); ++j) order.insert(order.end(), dag.steps[j], j);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[below(random, i)]);
  return to_genome(dag, order);
}

// The thesis's order crossover: `head`'s first `cut` nodes, then the others in `tail`'s order.
Genome cross(const Genome& head, const Genome& tail, size_t cut) {
  std::vector<bool> taken(head.size(), false);
  Genome child(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(cut));
  for (uint32_t node : child) taken[node] = true;
  for (uint32_t node : tail)
    if (!taken[node]) child.push_back(node);
  return child;
}

// Moves one node to a random place after its predecessor and before its successor.
void mutate(const Dag& dag, Genome& genome, std::mt19937_64& random) {
  const size_t from = below(random, genome.size());
  const uint32_t node = genome[from];
  genome.erase(genome.begin() + static_cast<std::ptrdiff_t>(from));
  auto position = [&](uint32_t other) {
    return static_cast<size_t>(std::find(genome.begin(), genome.end(), other) - genome.begin());
  };
  const size_t low = dag.step[node] > 0 ? position(node - 1) + 1 : 0;
  const size_t high =
      dag.step[node] + 1 < dag.steps[dag.job[node]] ? position(node + 1) : genome.size();
  genome.insert(genome.begin() + static_cast<std::ptrdiff_t>(low + below(random, high - low + 1)),
                node);
}

}  // namespace

SearchResult search_order(const MemoryCase& memory_case, const SearchParameters& parameters) {
  const Dag dag = make_dag(memory_case);
  std::mt19937_64 random(parameters.seed);
  SearchResult result;
  using Scored = std::pair<double, Genome>;
  auto scored = [&](Genome genome) {
    ++result.evaluations;
    const double makespan =
        run_schedule(memory_case, to_order(dag, genome), /*prefetch=*/true).makespan_s;
    return Scored{makespan, std::move(genome)};
  };
  auto by_makespan = [](const Scored& a, const Scored& b) { return a.first < b.first; };

  const size_t population = std::max<size_t>(parameters.population, 2);
  const size_t survivors = std::clamp<size_t>(parameters.survivors, 1, population - 1);
  std::vector<Scored> pool;
  for (const StepOrder& seed : parameters.seeds) pool.push_back(scored(to_genome(dag, seed)));
  while (pool.size() < population) pool.push_back(scored(random_genome(dag, random)));
  std::stable_sort(pool.begin(), pool.end(), by_makespan);

  const size_t length = dag.job.size();
  for (size_t generation = 0; generation < parameters.generations; ++generation) {
    pool.resize(survivors);
    while (pool.size() < population) {
      const Genome& a = pool[below(random, survivors)].second;
      const Genome& b = pool[below(random, survivors)].second;
      const size_t cut = length > 1 ? 1 + below(random, length - 1) : length;
      for (Genome child : {cross(b, a, cut), cross(a, b, cut)}) {
        const double draw = static_cast<double>(random() >> 11) * 0x1.0p-53;
        if (draw < parameters.mutation_rate && length > 1) mutate(dag, child, random);
        if (pool.size() < population) pool.push_back(scored(std::move(child)));
      }
    }
    std::stable_sort(pool.begin(), pool.end(), by_makespan);
  }
  result.best = to_order(dag, pool.front().second);
  result.best_makespan_s = pool.front().first;
  return result;
}

}  // namespace gpushare::sim
