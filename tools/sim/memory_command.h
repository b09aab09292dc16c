// `gpushare-sim memory ...`: the memory model's subcommand (memory_command.cpp).
#pragma once

namespace gpushare::sim {

// argv[0] is "memory"; returns the exit status.
int memory_main(int argc, char** argv);

}  // namespace gpushare::sim
