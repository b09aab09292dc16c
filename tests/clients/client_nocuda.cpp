// A program with no CUDA at all: it must behave identically with the shim preloaded (same output,
// same exit code). It allocates, uses threads and stdio, and exits with a chosen code.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  int exit_code = argc > 1 ? std::atoi(argv[1]) : 0;
  std::vector<long> squares(1000);
  std::thread worker([&] {
    for (size_t i = 0; i < squares.size(); ++i) squares[i] = static_cast<long>(i * i);
  });
  worker.join();
  long sum = 0;
  for (long s : squares) sum += s;
  std::string text = "no CUDA here: sum=" + std::to_string(sum);
  std::printf("%s\n", text.c_str());
  std::fprintf(stderr, "stderr line from a program without CUDA\n");
  return exit_code;
}
