// The memory trace's lines (memory_trace_file.h): each event read with its fields checked, the
// jobs' pauses rebuilt from their state changes.
#include "memory_trace_file.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "json_fields.h"

namespace gpushare::sim {
namespace {

struct Reading {
  int device = 0;
  Recording& recording;
  std::map<uint64_t, size_t> index;         // job id -> recording.jobs
  std::map<uint64_t, double> paused_since;  // job id -> when it stopped being resident
};

RecordedJob* job_of(Reading& r, uint64_t id) {
  auto it = r.index.find(id);
  return it == r.index.end() ? nullptr : &r.recording.jobs[it->second];
}

void resume(Reading& r, uint64_t id, double t) {
  auto it = r.paused_since.find(id);
  if (it == r.paused_since.end()) return;
  if (RecordedJob* job = job_of(r, id)) job->paused.push_back({it->second, t});
  r.paused_since.erase(it);
}

// One line's event; an error or an empty string.
std::string read_event(Fields& f, Reading& r) {
  std::string event;
  double t = 0;
  uint64_t id = 0;
  f.text("event", event);
  f.real("t", t);
  if (event == "start") {
    f.real("tick_s", r.recording.tick_s);
  } else if (event == "device") {
    uint64_t device = 0, capacity = 0;
    f.number("device", device, 1);
    f.number("capacity_bytes", capacity, 1);
    if (static_cast<int>(device) == r.device) r.recording.capacity_bytes = capacity;
  } else if (event == "job") {
    RecordedJob job;
    std::string job_class;
    f.number("id", job.id, 1);
    f.text("job", job.name);
    f.text("class", job_class);
    if (job_class != "production" && job_class != "opportunistic")
      f.fail("class", "must be \"production\" or \"opportunistic\"");
    job.production = job_class == "production";
    r.index[job.id] = r.recording.jobs.size();
    r.recording.jobs.push_back(job);
  } else if (event == "memory") {
    uint64_t device = 0, bytes = 0, swappable = 0;
    f.number("id", id, 1);
    f.number("device", device, 1);
    f.number("bytes", bytes, 1);
    f.number("swappable_bytes", swappable, 1);
    RecordedJob* job = job_of(r, id);
    if (job && static_cast<int>(device) == r.device) {
      job->bytes = std::max(job->bytes, bytes);
      job->swappable = std::max(job->swappable, swappable);
    }
  } else if (event == "state") {
    std::string state;
    f.number("id", id, 1);
    f.text("state", state);
    if (state == "resident")
      resume(r, id, t);
    else if (!r.paused_since.count(id))
      r.paused_since[id] = t;
  } else if (event == "burst") {
    Interval burst;
    uint64_t launches = 0;
    f.number("id", id, 1);
    f.real("start", burst.first);
    f.real("end", burst.second);
    f.number("launches", launches, 1);
    if (burst.second < burst.first) f.fail("end", "must not be before start");
    if (RecordedJob* job = job_of(r, id)) job->bursts.push_back(burst);
  } else if (event == "swap") {
    std::string direction;
    RecordedSwap swap;
    f.number("id", id, 1);
    f.text("direction", direction);
    f.number("bytes", swap.bytes, 1);
    f.real("seconds", swap.seconds);
    if (direction != "out" && direction != "in" && direction != "prefetch")
      f.fail("direction", "must be \"out\", \"in\" or \"prefetch\"");
    swap.to_device = direction != "out";
    r.recording.swaps.push_back(swap);
  } else if (event == "leave") {
    f.number("id", id, 1);
    resume(r, id, t);
  } else {
    f.fail("event", "must be one of start, device, job, memory, state, burst, swap, leave");
  }
  return f.finish();
}

}  // namespace

std::string load_memory_trace(const std::string& path, int device, Recording& recording) {
  std::ifstream file(path);
  if (!file) return path + ": cannot be read";
  recording = Recording{};
  Reading reading{device, recording, {}, {}};
  double last = 0;
  size_t number = 0;
  for (std::string line; std::getline(file, line);) {
    ++number;
    if (line.empty()) continue;
    const Fields::json object = Fields::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const std::string where = path + " line " + std::to_string(number);
    if (object.is_discarded()) return where + ": not valid JSON";
    Fields f(object, where + ":");
    if (std::string error = read_event(f, reading); !error.empty()) return error;
    if (object.contains("t") && object["t"].is_number()) last = object["t"].get<double>();
  }
  // Jobs still paused when the recording stopped.
  while (!reading.paused_since.empty()) resume(reading, reading.paused_since.begin()->first, last);
  return {};
}

}  // namespace gpushare::sim
