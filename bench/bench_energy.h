// The GPU's energy counter for the benchmarks (bench_prefill --energy), read through NVML
// (libnvidia-ml.so.1, opened at run time so nothing links it). On a card at its power cap
// the time of a call depends on the energy of everything around it, while energy is
// additive: the energy per call of stage-limited graphs gives a breakdown that differences
// of timings no longer give (docs/prefill-design.md, "Session 27").
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdint>

namespace flashmsa::bench {

/// NVML's total energy counter of the current CUDA device, in millijoules.
class EnergyCounter {
 public:
  /// Opens NVML and finds the current CUDA device by its PCI bus id; ok() says whether
  /// that worked (no NVML, an old driver, or no permission: false, and read() fails).
  EnergyCounter() {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    using InitFn = int (*)();
    using ByBusFn = int (*)(const char*, void**);
    const auto init = reinterpret_cast<InitFn>(dlsym(lib_, "nvmlInit_v2"));
    const auto by_bus = reinterpret_cast<ByBusFn>(dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    energy_ = reinterpret_cast<EnergyFn>(dlsym(lib_, "nvmlDeviceGetTotalEnergyConsumption"));
    int dev = 0;
    char bus[32] = {};
    if (init == nullptr || by_bus == nullptr || energy_ == nullptr || init() != 0) {
      energy_ = nullptr;
      return;
    }
    inited_ = true;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetPCIBusId(bus, sizeof(bus), dev) != cudaSuccess ||
        by_bus(bus, &device_) != 0) {
      energy_ = nullptr;
      return;
    }
    unsigned long long probe = 0;
    if (energy_(device_, &probe) != 0) energy_ = nullptr;
  }
  EnergyCounter(const EnergyCounter&) = delete;
  EnergyCounter& operator=(const EnergyCounter&) = delete;
  ~EnergyCounter() {
    if (lib_ != nullptr) {
      using ShutdownFn = int (*)();
      const auto shutdown = reinterpret_cast<ShutdownFn>(dlsym(lib_, "nvmlShutdown"));
      if (shutdown != nullptr && inited_) shutdown();
      dlclose(lib_);
    }
  }

  bool ok() const { return energy_ != nullptr; }

  /// The counter in millijoules since the driver loaded; false if it cannot be read.
  bool read(unsigned long long* mj) const { return energy_ != nullptr && energy_(device_, mj) == 0; }

  /// The counter right after its next update. The driver refreshes it in steps (about
  /// 100 ms on the H200, session 27 run E), so a window read this way at both ends is
  /// off by at most the idle energy after the work, not by a whole step. False if it
  /// cannot be read or does not change within 2 s.
  bool read_fresh(unsigned long long* mj) const {
    unsigned long long v0 = 0, v = 0;
    if (!read(&v0)) return false;
    const auto t0 = std::chrono::steady_clock::now();
    do {
      if (!read(&v)) return false;
      if (v != v0) {
        *mj = v;
        return true;
      }
    } while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
    return false;
  }

 private:
  using EnergyFn = int (*)(void*, unsigned long long*);
  void* lib_ = nullptr;
  bool inited_ = false;  // nvmlInit_v2 succeeded (nvmlShutdown is owed)
  void* device_ = nullptr;
  EnergyFn energy_ = nullptr;
};

}  // namespace flashmsa::bench
