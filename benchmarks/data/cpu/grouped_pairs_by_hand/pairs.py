import re, sys
s = open(sys.argv[1]).read()
n0 = s.count("einc_vbroadcast_runs2_f32x16(input0")
s, n = re.subn(r"einc_vbroadcast_runs2_f32x16\(input0\[N \* 200704 \+ \(C \+ F_q_o \* 16 \+ \(F_q_F_r_o \+ F_q_F_r_i\) / 8 \* 8\) \* 784 \+ ([^\]]*)\], input0\[[^\]]*\]\)",
               r"einc_pair(&XP[(C * 784 + \1) * 2])", s)
assert n == n0 == 162, (n, n0)
old = "input1_local[input1_c1 * 144 + input1_c2 * 48 + input1_c3 * 16 + input1_c0] ="
assert s.count(old) == 1
s = s.replace(old, "input1_local[input1_c1 * 144 + input1_c2 * 48 + input1_c3 * 16 + (input1_c0 % 8) * 2 + input1_c0 / 8] =")
k = s.count("F_q_F_r_o * 784 + output0_c1 * 784")
assert k == 6, k
s = s.replace("F_q_F_r_o * 784 + output0_c1 * 784", "F_q_F_r_o * 784 + ((output0_c1 % 2) * 8 + output0_c1 / 2) * 784")
helper = ("typedef double einc_f64x8 __attribute__((vector_size(64)));\n"
          "static inline einc_f32x16 einc_pair(const float* p) { double d; __builtin_memcpy(&d, p, 8); return (einc_f32x16)(einc_f64x8){d, d, d, d, d, d, d, d}; }\n")
s = s.replace("\nstatic inline void einc_parallel_0(", "\n" + helper + "\nstatic inline void einc_parallel_0(", 1)
head = re.search(r"for \(int64_t F_q_o = 0; F_q_o < 16; F_q_o\+\+\) \{\n", s) if "N < 16" in s else re.search(r"static inline void einc_parallel_0\([^)]*\) \{\n", s)
pack = ("  float XP[8 * 784 * 2] __attribute__((aligned(64)));\n"
        "  for (int64_t c = 0; c < 8; c++) for (int64_t p = 0; p < 784; p++) for (int64_t g = 0; g < 2; g++)\n"
        "    XP[(c * 784 + p) * 2 + g] = input0[N * 200704 + (F_q_o * 16 + g * 8 + c) * 784 + p];\n")
s = s[:head.end()] + pack + s[head.end():]
open(sys.argv[2], "w").write(s)
