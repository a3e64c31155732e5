// The fast verification harness: drives a Verilated unit from binary vector files and checks
// every output word, with no Python in the loop (sim/bench/fast.py writes the files, builds
// this file against each unit and reads the result).
//
// Usage: harness JOB   (JOB: "key value" lines, see sim/bench/fast.py)
//
// The unit is any generated module with the stream ports of its manifest: clk, rst,
// i__valid/i__ready/i__payload in, o__valid/o__ready/o__payload out. Each cycle c:
//   * step k is offered gaps[k] cycles after the cycle that follows step k-1's transfer
//     (cycle gaps[0] for step 0) and held, payload unchanged, until it transfers;
//   * o__ready is bit c of the ready pattern (high after the pattern ends);
//   * the inputs settle, a transfer is valid & ready, an output transfer is compared with
//     the next expected word and must come at least `latency` cycles after the transfer of
//     the step it follows (out_steps);
//   * then the clock edge.
// Two evaluations a cycle: the settled inputs (with the clock low), then the rising edge.
// Two evaluations a cycle: the inputs settled with the clock low, then the rising edge.
// Cycle 0 is the first cycle after two cycles of reset. Files are read in blocks, so memory
// stays flat whatever the step count. The result is written as JSON.
#include "Vtop.h"
#include "verilated.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace {

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "harness: %s\n", what.c_str());
    std::exit(2);
}

// A file of fixed-size records read in blocks.
class Records {
  public:
    Records(const std::string& path, size_t size, size_t block = 1 << 16)
        : size_(size), buf_(size * block) {
        if (path.empty()) return;
        f_ = std::fopen(path.c_str(), "rb");
        if (!f_) die("cannot open " + path);
    }
    ~Records() { if (f_) std::fclose(f_); }
    // Record k (k never decreases between calls, and stays within one block of the last).
    const uint8_t* at(uint64_t k) {
        if (k < first_ || k >= first_ + have_) {
            if (!f_) die("read past a missing file");
            first_ = k;
            have_ = std::fread(buf_.data(), size_, buf_.size() / size_, f_);
            if (have_ == 0) die("vector file ended early");
        }
        return buf_.data() + (k - first_) * size_;
    }
  private:
    std::FILE* f_ = nullptr;
    size_t size_;
    std::vector<uint8_t> buf_;
    uint64_t first_ = 0, have_ = 0;
};

// Ports of any width: Verilator's CData/SData/IData/QData or VlWide<N>.
template <typename T> void set_port(T& port, const uint8_t* bytes, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n && i < sizeof(T); ++i) v |= uint64_t(bytes[i]) << (8 * i);
    port = T(v);
}
template <std::size_t N> void set_port(VlWide<N>& port, const uint8_t* bytes, size_t n) {
    static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "words are copied as bytes");
    port[N - 1] = 0;
    std::memcpy(&port[0], bytes, n < 4 * N ? n : 4 * N);
}
template <typename T> void get_port(const T& port, uint8_t* bytes, size_t n) {
    uint64_t v = port;
    for (size_t i = 0; i < n; ++i) bytes[i] = i < sizeof(T) ? uint8_t(v >> (8 * i)) : 0;
}
template <std::size_t N> void get_port(const VlWide<N>& port, uint8_t* bytes, size_t n) {
    for (size_t i = 0; i < n; ++i) bytes[i] = i < 4 * N ? uint8_t(port[i / 4] >> (8 * (i % 4))) : 0;
}

std::string hex(const uint8_t* bytes, size_t n) {
    static const char* digits = "0123456789abcdef";
    std::string out;
    bool lead = true;
    for (size_t i = n; i-- > 0;) {
        for (int s = 4; s >= 0; s -= 4) {
            int d = (bytes[i] >> s) & 15;
            if (lead && d == 0) continue;
            lead = false;
            out += digits[d];
        }
    }
    return lead ? "0" : out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) die("usage: harness JOB");
    std::map<std::string, std::string> job;
    {
        std::FILE* f = std::fopen(argv[1], "r");
        if (!f) die(std::string("cannot open ") + argv[1]);
        char key[256], value[4096];
        while (std::fscanf(f, "%255s %4095s", key, value) == 2) job[key] = value;
        std::fclose(f);
    }
    auto num = [&](const char* k) -> int64_t {
        auto it = job.find(k);
        if (it == job.end()) die(std::string("job has no ") + k);
        return std::strtoll(it->second.c_str(), nullptr, 10);
    };
    auto path = [&](const char* k) -> std::string {
        auto it = job.find(k);
        return it == job.end() || it->second == "-" ? std::string() : it->second;
    };
    const uint64_t steps = num("steps"), outputs = num("outputs");
    const size_t in_bytes = num("in_bytes"), out_bytes = num("out_bytes");
    const int64_t latency = num("latency"), max_cycles = num("max_cycles");
    const uint64_t ready_bits = num("ready_bits");
    const bool stop = num("stop_on_mismatch") != 0;

    Records payload(path("payload"), in_bytes), expected(path("expected"), out_bytes);
    Records out_steps(path("out_steps"), 8), due_steps(path("out_steps"), 8);
    Records gaps(path("gaps"), 2), ready(path("ready"), 1);
    std::FILE* in_log = nullptr;
    std::FILE* out_log = nullptr;
    if (!path("in_cycles").empty() && !(in_log = std::fopen(path("in_cycles").c_str(), "wb")))
        die("cannot write " + path("in_cycles"));
    if (!path("out_cycles").empty() && !(out_log = std::fopen(path("out_cycles").c_str(), "wb")))
        die("cannot write " + path("out_cycles"));
    std::FILE* words_log = nullptr;
    if (!path("words").empty() && !(words_log = std::fopen(path("words").c_str(), "wb")))
        die("cannot write " + path("words"));

    VerilatedContext ctx;
    Vtop top{&ctx};
    top.clk = 0;
    top.rst = 1;
    top.i___05Fvalid = 0;
    top.o___05Fready = 0;
    top.eval();
    for (int i = 0; i < 2; ++i) {
        top.clk = 1; top.eval(); top.clk = 0; top.eval();
    }
    top.rst = 0;

    std::vector<uint8_t> word(out_bytes);
    std::deque<int64_t> pending;           // transfer cycles of steps with an output due
    uint64_t due = 0;                      // the next output whose step has not transferred
    uint64_t transferred = 0, checked = 0, mismatches = 0;
    int64_t offer_at = steps ? *(const uint16_t*)gaps.at(0) : 0;
    bool valid = false, timeout = false;
    int64_t first_transfer = -1, last_transfer = -1, last_output = -1, gap_max = -1;
    int64_t lat_min = -1, lat_max = -1, early = -1;
    std::string first_mismatch;
    int64_t cycle = 0;
    for (; checked < outputs || transferred < steps; ++cycle) {
        if (cycle >= max_cycles) { timeout = true; break; }
        if (!valid && transferred < steps && cycle >= offer_at) {
            set_port(top.i___05Fpayload, payload.at(transferred), in_bytes);
            valid = true;
        }
        top.i___05Fvalid = valid;
        bool rdy = uint64_t(cycle) >= ready_bits ||
                   ((*ready.at(cycle >> 3) >> (cycle & 7)) & 1);
        top.o___05Fready = rdy;
        top.eval();
        if (valid && top.i___05Fready) {
            if (in_log) std::fwrite(&cycle, 8, 1, in_log);
            if (first_transfer < 0) first_transfer = cycle;
            if (last_transfer >= 0 && cycle - last_transfer > gap_max) gap_max = cycle - last_transfer;
            last_transfer = cycle;
            if (due < outputs && transferred == *(const uint64_t*)due_steps.at(due)) {
                pending.push_back(cycle);      // the step an output will follow
                ++due;
            }
            ++transferred;
            valid = false;
            if (transferred < steps) offer_at = cycle + 1 + *(const uint16_t*)gaps.at(transferred);
        }
        if (rdy && top.o___05Fvalid) {
            get_port(top.o___05Fpayload, word.data(), out_bytes);
            if (out_log) std::fwrite(&cycle, 8, 1, out_log);
            if (words_log) std::fwrite(word.data(), out_bytes, 1, words_log);
            last_output = cycle;
            uint64_t k = checked++;
            bool bad;
            if (k >= outputs) {
                bad = true;
                if (first_mismatch.empty())
                    first_mismatch = "{\"output\": " + std::to_string(k) +
                                     ", \"step\": null, \"expected\": null, \"actual\": \"" +
                                     hex(word.data(), out_bytes) + "\"}";
            } else {
                int64_t step = *(const int64_t*)out_steps.at(k);
                if (!pending.empty()) {
                    int64_t lat = cycle - pending.front();
                    pending.pop_front();
                    if (lat_min < 0 || lat < lat_min) lat_min = lat;
                    if (lat > lat_max) lat_max = lat;
                    if (lat < latency && early < 0) early = k;
                } else if (early < 0) {
                    early = k;                       // an output before its step transferred
                }
                const uint8_t* want = expected.at(k);
                bad = std::memcmp(want, word.data(), out_bytes) != 0;
                if (bad && first_mismatch.empty())
                    first_mismatch = "{\"output\": " + std::to_string(k) + ", \"step\": " +
                                     std::to_string(step) + ", \"expected\": \"" +
                                     hex(want, out_bytes) + "\", \"actual\": \"" +
                                     hex(word.data(), out_bytes) + "\"}";
            }
            if (bad) {
                ++mismatches;
                if (stop) { ++cycle; break; }
            }
        }
        top.clk = 1;       // the edge; the falling half-cycle is evaluated with the next
        top.eval();        // cycle's inputs (the unit has no negative-edge logic)
        top.clk = 0;
    }
    for (std::FILE* f : {in_log, out_log, words_log}) if (f) std::fclose(f);
    auto opt = [](int64_t v) { return v < 0 ? std::string("null") : std::to_string(v); };
    std::string out = "{\"steps\": " + std::to_string(steps) +
        ", \"transferred\": " + std::to_string(transferred) +
        ", \"outputs\": " + std::to_string(outputs) +
        ", \"checked\": " + std::to_string(checked) +
        ", \"mismatches\": " + std::to_string(mismatches) +
        ", \"first_mismatch\": " + (first_mismatch.empty() ? "null" : first_mismatch) +
        ", \"timeout\": " + (timeout ? "true" : "false") +
        ", \"cycles\": " + std::to_string(cycle) +
        ", \"first_transfer_cycle\": " + opt(first_transfer) +
        ", \"last_output_cycle\": " + opt(last_output) +
        ", \"latency_min\": " + opt(lat_min) + ", \"latency_max\": " + opt(lat_max) +
        ", \"early_output\": " + opt(early) +
        ", \"transfer_gaps_max\": " + opt(gap_max) + "}\n";
    std::string result = path("result");
    std::FILE* f = result.empty() ? stdout : std::fopen(result.c_str(), "w");
    if (!f) die("cannot write " + result);
    std::fputs(out.c_str(), f);
    if (f != stdout) std::fclose(f);
    return 0;
}
