"""einc's own math functions for the HLSL target, where the Vulkan built-ins fall short of the
accuracy docs/LANGUAGE.md promises (4 ulps for float32 and float64).

Vulkan's precision rules let `exp`, `exp2` be 3 + 2|x| ulps off, `log`, `log2` off by 2^-21
absolutely near 1 and `sin`, `cos` by 2^-11 absolutely, and `pow` inherit all of that; lavapipe
uses them: float32 `tanh(1e-5)` was 838 ulps off, `log` near 1 up to 328 ulps, `exp` near -62
50 ulps, `pow(-2, 3)` NaN. Its float64 `sqrt`, `floor`, `ceil`, `trunc`, `round` and `fma` work at
float32 precision (`round(123456789.5)` gave 123456793), and HLSL has no float64 `exp`, `log`,
`sin`... at all. So these are computed here from what is exact: `+ - * /`, compares,
conversions, float32 `floor`/`round`/`trunc`/`abs`/`sqrt` and the bits of a float32 (`asuint`,
`asfloat`; a float64 is built with `asdouble(lo, hi)` but cannot be taken apart, so its
exponent comes from its float32 conversion).

The Vulkan stack also rewrites float arithmetic as fast math (naga drops SPIR-V's
`NoContraction`, and Mesa then folds `x - x` to 0, `(a + b) - b` to `a`, `0 * x` to 0): no
helper relies on an error-free transformation that such a rewrite cancels (no `(x + 2^23) -
2^23` rounding, no TwoSum). Extra precision comes from values split on their bits (`asuint(x) &
0xfffff000u`), which no rewrite sees through, and from exact products of short operands.

Each helper is an HLSL function (valid C++ with `cpp_prelude()`, which tests/test_hlsl_math.py
uses to sweep millions of arguments with g++): `HELPERS[name] = (definition, helpers it calls)`,
named `einc_<function>_<f32|f64>`. `FUNCTIONS[(op type, element type)]` is the helper computing
that math op. The polynomial coefficients come from scripts/fit_math.py (Chebyshev
interpolation in mpmath) or are Taylor coefficients; the method of each function is in its
comment.
"""

from __future__ import annotations

import math

import numpy as np
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import f32, f64
from xdsl.ir import Attribute, Operation

from einc.dialects.math_ext import ErfcOp


def f(value: float) -> str:
    """A float32 literal that reads back as `value` rounded to float32."""
    text = repr(float(np.float32(value)))
    return (text if ("e" in text or "." in text) else text + ".0") + "f"


def d(value: float) -> str:
    """A float64 literal (HLSL: the `L` suffix)."""
    return repr(float(value)) + "L"


def horner(variable: str, coefficients: list[float], literal=f) -> str:
    """`c0 + v * (c1 + v * (...))` (lowest coefficient first)."""
    text = literal(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"{literal(c)} + {variable} * ({text})"
    return text


def _split(value: float, bits: int) -> tuple[float, float]:
    """`value` as a float32 with its top `bits` significand bits, and the float32 rest."""
    top = np.float32(value)
    mask = np.uint32(0xFFFFFFFF) << np.uint32(24 - bits)
    hi = float((np.array(top).view(np.uint32) & mask).view(np.float32))
    return hi, float(np.float32(value - hi))


INF = "asfloat(einc_inf_bits)"
NAN = "asfloat(einc_nan_bits)"
"""Built at run time from the target's preamble globals: naga refuses infinite or NaN constants."""


def _isnan(v: str) -> str:
    return f"(asuint({v}) & 0x7fffffffu) > 0x7f800000u"


LN2_HI, LN2_LO = _split(math.log(2), 15)  # k * LN2_HI exact for |k| < 512
LOG2E_HI, LOG2E_LO = _split(1 / math.log(2), 12)
LOG10E_HI, LOG10E_LO = _split(1 / math.log(10), 12)
LOG10_2_HI, LOG10_2_LO = _split(math.log10(2), 12)
PIO2_HI, PIO2_LO = _split(math.pi / 2, 8)

TWO_OVER_PI = (
    0x00000000, 0x00000000, 0xA2F9836E, 0x4E441529, 0xFC2757D1, 0xF534DDC0, 0xDB629599,
    0x3C439041, 0xFE5163AB, 0xDEBBC561, 0xB7246E3A, 0x424DD2E0, 0x06492EEA, 0x09D1921C,
    0xFE1DEB1C, 0xB129A73E, 0xE88235F5, 0x2EBB4484, 0xE99C7026, 0xB45F7E41, 0x3991D639,
    0x835339F4, 0x9C845F8B, 0xBDF9283B, 0x1FF897FF, 0xDE05980F, 0xEF2F118B, 0x5A0A6D1F,
    0x6D367ECF, 0x27CB09B7, 0x4F463F66, 0x9E5FEA2D, 0x7527BAC7, 0xEBE5F17B, 0x3D0739F7,
    0x8A5292EA, 0x6BFB5FB1, 0x1F8D5D08, 0x56033046, 0xFC7B6BAB,
)
"""The bits of 2/pi after 64 zero bits, in 32-bit words (scripts/fit_math.py prints them)."""
PIO2_Q62 = 7244019458077122842
"""floor(pi/2 * 2^62)."""

# scripts/fit_math.py
TANH_F32 = [-0.33333334, 0.13333334, -0.053968254, 0.02186942, -0.008861562, 0.0035749013,
            -0.0013695789, 0.00037633264]  # fmt: skip
ERF_F32 = [0.12837917, -0.37612638, 0.11283792, -0.026866158, 0.0052238177, -0.00085393956,
           0.00011815798, -1.1832237e-05]  # fmt: skip
TAN_F32 = [0.33333334, 0.13333334, 0.053968254, 0.021869497, 0.008862928, 0.0035963445,
           0.0014272206, 0.00069322466, 4.2157397e-05, 0.00027338593]  # fmt: skip
ERFCX_F32 = [  # (upper end, middle, coefficients in x - middle) of erfc(x) * exp(x^2)
    (0.84375, 0.671875, [0.5371597, -0.40657085, 0.2639949, -0.15279955, 0.08066282,
                         -0.039439358, 0.018246094, -0.007877331]),
    (1.25, 1.046875, [0.41510797, -0.25924686, 0.14370896, -0.072534375, 0.033885326,
                      -0.014822759, 0.0061979154, -0.0024307936]),
    (1.75, 1.5, [0.32158542, -0.16362292, 0.07615105, -0.03293091, 0.013376238, -0.005145599,
                 0.0019142958, -0.0006710878]),
    (2.5, 2.125, [0.24267036, -0.09703012, 0.036481395, -0.01300482, 0.0044220546,
                  -0.0014420255, 0.00046422041, -0.00014050023]),
    (3.5, 3.0, [0.17900115, -0.05437226, 0.015884392, -0.0044794357, 0.0012226267,
                -0.0003240268, 8.6177846e-05, -2.1617743e-05]),
    (5.0, 4.25, [0.12934527, -0.02894433, 0.006331866, -0.0013559409, 0.0002845766,
                 -5.8546313e-05, 1.1838783e-05, -2.470105e-06, 4.821293e-07]),
    (7.0, 6.0, [0.09277657, -0.015060353, 0.0024144468, -0.00038245055, 5.9879196e-05,
                -9.261606e-06, 1.4183006e-06, -2.2621704e-07, 3.389147e-08]),
    (10.25, 8.625, [0.064982206, -0.0074361344, 0.0008455438, -9.5547446e-05, 1.073074e-05,
                    -1.195689e-06, 1.3269556e-07, -1.5759424e-08, 1.7273956e-09]),
]  # fmt: skip

# float64 (scripts/fit_math.py)
TANH_F64 = [-0.3333333333333333, 0.13333333333333333, -0.05396825396825397, 0.021869488536155203,
            -0.008863235529902052, 0.003592128036559161, -0.001455834386438236,
            0.0005900274250060934, -0.0002391288608199909, 9.691278673665791e-05,
            -3.92607299632726e-05, 1.583870036148241e-05, -6.207055102867627e-06,
            2.127290332440043e-06, -4.560433190924434e-07]  # fmt: skip
ERF_F64 = [0.1283791670955126, -0.37612638903183754, 0.11283791670955125, -0.026866170645129122,
           0.005223977625271039, -0.0008548326964602001, 0.00012055322815081628,
           -1.4924696786594679e-05, 1.6412809871169065e-06, -1.5040080844080406e-07]  # fmt: skip
ERFCX_F64 = [
    (0.75, 0.625, [0.5568138808733625, -0.43236181600380946, 0.286587745870984, -0.16882964988963145, 0.0905346073431822, -0.04489820811899434, 0.020824409581205183, -0.0091094151496145, 0.003782695592344603, -0.0014989110049978508, 0.0005726279630028807, -0.00020902552235554318]),
    (1.0, 0.875, [0.464311583202669, -0.3158338964908418, 0.18795692377318324, -0.10091439212620508, 0.049828415330766374, -0.022925811484302092, 0.009922776927405338, -0.004069537716571997, 0.0015904622736063875, -0.0005950744833733481, 0.0002151254639998011, -7.453699259223779e-05]),
    (1.25, 1.125, [0.3956980795529959, -0.2380584881012718, 0.1278822804390654, -0.06279394840488244, 0.0286195442415685, -0.012238784453081762, 0.004950303970110052, -0.0019056264622925678, 0.0007016112060703613, -0.00024806563878487813, 8.492529808226711e-05, -2.7946426854363904e-05]),
    (1.5, 1.375, [0.3432958898621254, -0.18431546997466777, 0.0898621186469573, -0.040503371223401134, 0.017084991607308836, -0.006804603105271702, 0.002576220801453373, -0.0009320855876790578, 0.0003236480309824724, -0.00010823602609943266, 3.512107741543196e-05, -1.0984229225264013e-05]),
    (1.875, 1.6875, [0.2933816487652772, -0.1382161025127019, 0.06014197577509476, -0.024484345594822425, 0.009412321291261355, -0.0034404213657037073, 0.0012022034916774032, -0.0004033437671185162, 0.00013038586104082174, -4.0734403157786974e-05, 1.2439570278730979e-05, -3.6540535357083304e-06]),
    (2.25, 2.0625, [0.24888049618416236, -0.10174712033584284, 0.03902706049148705, -0.014169205381434733, 0.004901537195962952, -0.0016239139657135547, 0.0005174049019247002, -0.0001590761197071295, 4.732642901934822e-05, -1.3658127203174196e-05, 3.860951353627866e-06, -1.0542528458456675e-06]),
    (2.75, 2.5, [0.2108063640611436, -0.07434734678979467, 0.024937997086656904, -0.008001569382102993, 0.00246703681570177, -0.0007335909369619076, 0.00021101982424265024, -5.8868974413925456e-05, 1.596185543102241e-05, -4.214037033646475e-06, 1.0851615468871061e-06, -2.76259604831331e-07, 6.792056200810677e-08]),
    (3.25, 3.0, [0.17900115118138996, -0.05437226000717287, 0.015884371159871843, -0.004479431018372687, 0.001223039052282243, -0.00032412554447595345, 8.355414608132536e-05, -2.098946588701692e-05, 5.14623762344707e-06, -1.2333237358733866e-06, 2.9209087637966734e-07, -6.709141457817152e-08]),
    (4.0, 3.625, [0.15028972247426936, -0.038778679157059695, 0.009717010529927904, -0.0023696773240500634, 0.0005634651151286321, -0.00013084651252985046, 2.9715502186994784e-05, -6.607951491442342e-06, 1.4404236354346754e-06, -3.0804796603359406e-07, 6.470906332341144e-08, -1.3612436219574862e-08, 2.762807319664533e-09]),
    (5.0, 4.5, [0.12248480427384142, -0.026015928630939815, 0.005413125434612216, -0.0011045761167898017, 0.0002212664545309336, -4.355082856393897e-05, 8.42924195260638e-06, -1.605497013589794e-06, 3.0112686390069487e-07, -5.565085307376166e-08, 1.0136576298634514e-08, -1.8217866412269658e-09, 3.3190334902930086e-10, -5.808233719088603e-11]),
    (6.25, 5.625, [0.09878515717340754, -0.01704614889467775, 0.002900569640845178, -0.0004869631099489656, 8.070107369233352e-05, -1.3207828174732364e-05, 2.13568005121925e-06, -3.4132222075847067e-07, 5.393577600682941e-08, -8.429852087456086e-09, 1.3030601747935313e-09, -1.9942871731834114e-10, 3.116485431547134e-11, -4.673054032870381e-12]),
    (8.0, 7.125, [0.07842658154261602, -0.010800380113234368, 0.0014738732358211466, -0.0001993555386724371, 2.6732511389909722e-05, -3.554558008140261e-06, 4.6876186165358576e-07, -6.13227814188975e-08, 7.959256189936702e-09, -1.025137243301141e-09, 1.3104317952556797e-10, -1.6614218912669393e-11, 2.0930310734590007e-12, -2.738489826502387e-13, 3.399698593558039e-14]),
    (10.5, 9.25, [0.06064311514114366, -0.006481536984354883, 0.0006888980358610106, -7.282010176030595e-05, 7.65604728885358e-06, -8.006657357117056e-07, 8.329641227585865e-08, -8.621119556623742e-09, 8.87761548101259e-10, -9.096282446239665e-11, 9.274304055305219e-12, -9.396096271875937e-13, 9.488149586122025e-14, -1.0126223217754482e-14, 1.0124034516104185e-15]),
    (14.0, 12.25, [0.045904344454949904, -0.0037227279492399825, 0.0003009270767601186, -2.4247505952362827e-05, 1.947564421828883e-06, -1.5593671394348064e-07, 1.2446558694903273e-08, -9.903914841682364e-10, 7.856572628915812e-11, -6.213554840023204e-12, 4.89954847140158e-13, -3.8517548428847705e-14, 3.0118282311251277e-15, -2.3538878467019494e-16, 1.9802460347016e-17, -1.538020129050722e-18]),
    (19.0, 16.5, [0.034130853321913276, -0.002061007472374518, 0.0001242300277337253, -7.474676512048836e-06, 4.4893264245514456e-07, -2.6915164584930307e-08, 1.6108089405218722e-09, -9.623347564205427e-11, 5.73914437799868e-12, -3.416736258428352e-13, 2.03071847224872e-14, -1.2047901965171872e-15, 7.11165163472332e-17, -4.204896168490145e-18, 2.7173456995634043e-19, -1.6007347513956083e-20]),
    (27.5, 23.25, [0.02424383530389913, -0.0010408254642029686, 4.464326118011028e-05, -1.9130945102684605e-06, 8.190690818441015e-08, -3.503557993528736e-09, 1.4972827821797888e-10, -6.39300666027248e-12, 2.727183619284614e-13, -1.1623381339984039e-14, 4.949459074225654e-16, -2.1057016031313926e-17, 8.953530033370381e-19, -3.8023988499434245e-20, 1.5968573222359098e-21, -6.769796704050551e-23, 3.35518343837581e-24, -1.4194802700396353e-25]),
]
"""(upper end, middle, coefficients in x - middle) of erfc(x) exp(x^2) on [0.5, 27.5]."""

# split constants (high part short enough for exact products, low part from mpmath)
LN2_HI64, LN2_LO64 = 0.6931471803691238, 1.9082149292705877e-10  # hi: 32 bits
LOG2E_HI64, LOG2E_LO64 = 1.442695040255785, 6.331784189566044e-10  # hi: 29 bits
LOG10E_HI64, LOG10E_LO64 = 0.43429448176175356, 1.414982685385801e-10  # hi: 29 bits
LOG10_2_HI64, LOG10_2_LO64 = 0.30102999566395283, 2.8363394551044964e-14  # hi: 42 bits

POW_TABLE_F64 = [  # (invc, -log2(invc) cut to 24 bits, the rest), j = -32 .. 64: scripts/fit_math.py
    (1.333333969116211, -0.41503816843032837, -1.8778954885255313e-08),
    (1.3195877075195312, -0.40008723735809326, -6.446101927118247e-09),
    (1.306121826171875, -0.3852894604206085, -7.533415797884579e-09),
    (1.292928695678711, -0.37064269185066223, -2.163680213137348e-08),
    (1.2800006866455078, -0.35614457726478577, -6.88221083833344e-09),
    (1.2673263549804688, -0.34178808331489563, -3.976618407381138e-09),
    (1.2549018859863281, -0.32757455110549927, -2.093167714856845e-08),
    (1.2427177429199219, -0.3134986460208893, -9.878069450890669e-09),
    (1.2307701110839844, -0.2995612919330597, -2.1821384289514906e-08),
    (1.2190475463867188, -0.28575438261032104, -1.3732228324166475e-08),
    (1.2075462341308594, -0.27207842469215393, -2.8569831783119947e-09),
    (1.1962623596191406, -0.2585338056087494, -2.490746397352171e-08),
    (1.1851844787597656, -0.2451116293668747, -8.556146172549256e-09),
    (1.1743125915527344, -0.23181648552417755, -6.6162564012864265e-09),
    (1.1636371612548828, -0.2186412662267685, -9.148475441058391e-09),
    (1.1531524658203125, -0.20558325946331024, -1.427307320672393e-08),
    (1.1428565979003906, -0.1926443874835968, -2.528031624076549e-09),
    (1.1327438354492188, -0.17982162535190582, -1.4172058914473747e-08),
    (1.1228065490722656, -0.16710937023162842, -1.3664226312599895e-08),
    (1.1130428314208984, -0.15450909733772278, -1.330223542464313e-08),
    (1.1034488677978516, -0.14201977849006653, -3.0408265163555586e-10),
    (1.0940170288085938, -0.12963518500328064, -9.42198684290165e-09),
    (1.0847454071044922, -0.11735647171735764, -5.9684337100324685e-09),
    (1.0756301879882812, -0.10518214851617813, -2.1845503590548273e-09),
    (1.0666675567626953, -0.09311060607433319, -2.1952020224220435e-09),
    (1.057851791381836, -0.0811375081539154, -6.995391397310471e-09),
    (1.0491809844970703, -0.06926356256008148, -2.7856667292397806e-09),
    (1.0406513214111328, -0.05748676136136055, -1.6708921326110072e-09),
    (1.0322589874267578, -0.04580497741699219, -2.0654374583316327e-09),
    (1.0240001678466797, -0.03421594947576523, -2.3382732837511985e-09),
    (1.0158729553222656, -0.022719990462064743, -4.6690792462938855e-11),
    (1.00787353515625, -0.011314624920487404, -3.7657927612669783e-10),
    (1.0, 0.0, 0.0),
    (0.99224853515625, 0.011226567439734936, 5.307974872770386e-11),
    (0.9846153259277344, 0.022367898374795914, 6.449865887164647e-10),
    (0.9770994186401367, 0.03342273086309433, 1.9514890028115736e-09),
    (0.9696969985961914, 0.044394075870513916, 4.922774466206066e-10),
    (0.9624061584472656, 0.055282220244407654, 2.7848438604703074e-10),
    (0.9552240371704102, 0.0660889521241188, 1.8575280723639953e-09),
    (0.9481477737426758, 0.07681616395711899, 2.7863553675907522e-09),
    (0.9411764144897461, 0.08746292442083359, 2.8208338147532034e-09),
    (0.9343061447143555, 0.09803273528814316, 3.3563889717149873e-09),
    (0.9275360107421875, 0.10852479934692383, 1.3965879551059208e-09),
    (0.920863151550293, 0.11894131451845169, 5.430137538263492e-09),
    (0.9142856597900391, 0.1292831003665924, 2.569702042231348e-09),
    (0.907801628112793, 0.13955101370811462, 5.4743313640643365e-09),
    (0.9014081954956055, 0.14974752068519592, 7.278339759584997e-09),
    (0.8951053619384766, 0.15987057983875275, 4.5157353550315094e-09),
    (0.8888893127441406, 0.1699243038892746, 9.622598329889831e-09),
    (0.8827590942382812, 0.17990830540657043, 1.0686642733344139e-08),
    (0.8767127990722656, 0.18982377648353577, 8.474760162586812e-09),
    (0.8707485198974609, 0.19967196881771088, 1.055556672590965e-08),
    (0.8648653030395508, 0.20945262908935547, 5.613513304160492e-09),
    (0.8590602874755859, 0.21916870772838593, 6.214270840857065e-09),
    (0.8533334732055664, 0.22881844639778137, 7.621973949490425e-09),
    (0.847681999206543, 0.23840492963790894, 1.3916582326044742e-08),
    (0.8421049118041992, 0.24792811274528503, 2.637704053797929e-09),
    (0.8366012573242188, 0.2573879063129425, 2.2371037260424353e-08),
    (0.8311691284179688, 0.26678600907325745, 1.567378358758768e-08),
    (0.8258066177368164, 0.27612408995628357, 2.5097259847571038e-08),
    (0.8205127716064453, 0.2854022979736328, 6.879943523496173e-09),
    (0.8152866363525391, 0.29462072253227234, 4.861523469863097e-09),
    (0.8101263046264648, 0.3037812411785126, 1.4487963124103064e-09),
    (0.8050317764282227, 0.31288236379623413, 2.9788001850204787e-10),
    (0.8000001907348633, 0.3219277262687683, 2.4653333315558908e-08),
    (0.7950305938720703, 0.33091771602630615, 5.039774042644581e-10),
    (0.7901229858398438, 0.33985084295272827, 1.9845407042595888e-08),
    (0.7852764129638672, 0.3487275242805481, 6.513554783225038e-09),
    (0.7804880142211914, 0.35755160450935364, 1.3147817509651314e-08),
    (0.7757577896118164, 0.3663218021392822, 1.4396708257341928e-08),
    (0.7710847854614258, 0.3750385642051697, 2.8726575742924392e-08),
    (0.7664670944213867, 0.38370421528816223, 2.3441312599469067e-08),
    (0.7619047164916992, 0.3923175036907196, 5.0793686785491425e-09),
    (0.7573966979980469, 0.4008789360523224, 2.727764958327902e-08),
    (0.7529411315917969, 0.40939101576805115, 6.3609786028090694e-09),
    (0.7485380172729492, 0.4178524911403656, 1.2996616617232352e-08),
    (0.7441864013671875, 0.42626404762268066, 1.9148977838971964e-08),
    (0.7398843765258789, 0.4346282482147217, 1.1668750350195995e-08),
    (0.7356319427490234, 0.4429439604282379, 8.372857782796527e-09),
    (0.7314281463623047, 0.45121192932128906, 2.0926706317554698e-08),
    (0.7272729873657227, 0.45943108201026917, 2.0679167761395712e-08),
    (0.7231636047363281, 0.4676060080528259, 1.498253890818885e-08),
    (0.7191009521484375, 0.47573375701904297, 1.7912697515697315e-08),
    (0.7150840759277344, 0.48381519317626953, 2.5144479864501447e-08),
    (0.7111110687255859, 0.49185317754745483, 4.773547870939044e-09),
    (0.7071819305419922, 0.4998466670513153, 1.5451869568031094e-08),
    (0.7032966613769531, 0.5077946782112122, 4.797881210378128e-08),
    (0.6994533538818359, 0.5157002210617065, 2.5681189535987005e-08),
    (0.6956520080566406, 0.5235622525215149, 4.750084070919906e-08),
    (0.6918916702270508, 0.5313819050788879, 1.7640872423284083e-08),
    (0.6881723403930664, 0.5391581654548645, 2.221619221467112e-08),
    (0.6844921112060547, 0.5468941330909729, 4.7324883180949234e-08),
    (0.6808509826660156, 0.5545889735221863, 5.01381122066482e-08),
    (0.6772489547729492, 0.562241792678833, 4.0351998432617593e-08),
    (0.6736841201782227, 0.5698557496070862, 5.2204356854561426e-08),
    (0.6701574325561523, 0.5774280428886414, 4.764761584431233e-10),
    (0.6666669845581055, 0.5849617719650269, 4.082568989013531e-08),
]
"""For m in [0.75, 1.5) nearest 1 + j/128: invc ~ 1/m with 20 bits (m's 24-bit head times it is
exact; 1 for j = 0, where r = m - 1 is exact and log2(m) small)."""
LOG2E_HI16, LOG2E_LO16 = 1.44268798828125, 7.05260771340736e-06  # hi: 16 bits

EXP_TAYLOR = [1 / math.factorial(n) for n in range(2, 9)]  # exp(r) = 1 + r + r^2 * P(r)
EXP2_TAYLOR = [math.log(2) ** n / math.factorial(n) for n in range(1, 10)]
SIN_TAYLOR = [(-1) ** n / math.factorial(2 * n + 1) for n in range(1, 6)]  # sin = r + r z P(z)
COS_TAYLOR = [(-1) ** n / math.factorial(2 * n) for n in range(2, 7)]  # cos = 1 - z/2 + z^2 P(z)
LOG_SERIES = [2 / (2 * n + 1) for n in range(1, 5)]  # log(1+f) = 2s + s R(s^2), R = z P(z)


# ---- float32 -------------------------------------------------------------------------------------

_LDEXP_F32 = f"""inline float einc_ldexp_f32(float x, int k) {{
  // x * 2^k for x near 1 and k in [-252, 254], rounded once (a subnormal result too)
  if (k < -126) return (x * asfloat((uint)(k + 253) << 23)) * {f(2.0**-126)};
  if (k > 127) {{ x *= 2.0f; k -= 1; }}
  return x * asfloat((uint)(k + 127) << 23);
}}"""

_EXPK_F32 = f"""inline float einc_expk_f32(float a, float b) {{
  // exp(a + b), b small: k = round((a + b) / ln 2), r = a + b - k ln 2 (Cody-Waite: k * LN2_HI
  // is exact), exp(r) = 1 + r + r^2 P(r) (Taylor, |r| < 0.4), times 2^k
  float k = round(a * {f(1 / math.log(2))});
  float r = ((a - k * {f(LN2_HI)}) - k * {f(LN2_LO)}) + b;
  float p = 1.0f + (r + r * r * ({horner("r", EXP_TAYLOR)}));
  return einc_ldexp_f32(p, (int)k);
}}"""

_EXP_F32 = f"""inline float einc_exp_f32(float x) {{
  if ({_isnan("x")}) return x;
  if (x > 89.0f) return {INF};
  if (x < -104.0f) return 0.0f;
  return einc_expk_f32(x, 0.0f);
}}"""

_EXP2_F32 = f"""inline float einc_exp2_f32(float x) {{
  // 2^x = 2^k * 2^f, k = round(x), f = x - k exact, 2^f by its Taylor series (|f| <= 1/2)
  if ({_isnan("x")}) return x;
  if (x >= 128.0f) return {INF};
  if (x <= -151.0f) return 0.0f;
  float k = round(x);
  float t = x - k;
  return einc_ldexp_f32(1.0f + t * ({horner("t", EXP2_TAYLOR)}), (int)k);
}}"""

_LOG_PROLOGUE = f"""  // x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1 exact, s = f / (2 + f):
  // log(m) = f - hfsq + s (hfsq + R(s^2)), hfsq = f^2 / 2, R the atanh series
  uint u = asuint(x);
  if ((u & 0x7fffffffu) == 0u) return -{INF};
  if ((u & 0x7fffffffu) > 0x7f800000u || u == 0x7f800000u) return x;
  if ((u >> 31) != 0u) return {NAN};
  int e = 0;
  if (u < 0x00800000u) {{ u = asuint(x * 8388608.0f); e = -23; }}
  e += (int)(u >> 23) - 127;
  u = (u & 0x007fffffu) | 0x3f800000u;
  if (u > 0x3fb504f3u) {{ u -= 0x00800000u; e += 1; }}
  float f = asfloat(u) - 1.0f;
  float k = (float)e;
  float hfsq = 0.5f * f * f;
  float s = f / (2.0f + f);
  float z = s * s;
  float R = z * ({horner("z", LOG_SERIES)});"""

_LOG_F32 = f"""inline float einc_log_f32(float x) {{
{_LOG_PROLOGUE}
  return k * {f(LN2_HI)} - ((hfsq - (s * (hfsq + R) + k * {f(LN2_LO)})) - f);
}}"""

_LOG_HI_LO = """  // log(m) = hi + lo, hi with 12 significant bits (its bits cut: no rewrite cancels lo)
  float hi = asfloat(asuint(f - hfsq) & 0xfffff000u);
  float lo = ((f - hi) - hfsq) + s * (hfsq + R);"""

_LOG2_F32 = f"""inline float einc_log2_f32(float x) {{
{_LOG_PROLOGUE}
{_LOG_HI_LO}
  float a = hi * {f(LOG2E_HI)};
  float w = k + a;
  return w + ((((lo + hi) * {f(LOG2E_LO)} + lo * {f(LOG2E_HI)}) + ((k - w) + a)));
}}"""

_LOG10_F32 = f"""inline float einc_log10_f32(float x) {{
{_LOG_PROLOGUE}
{_LOG_HI_LO}
  return (((k * {f(LOG10_2_LO)} + (lo + hi) * {f(LOG10E_LO)}) + lo * {f(LOG10E_HI)}) + hi * {f(LOG10E_HI)}) + k * {f(LOG10_2_HI)};
}}"""

_TANH_F32 = f"""inline float einc_tanh_f32(float x) {{
  // |x| < 0.625: x + x^3 P(x^2) (fitted); else 1 - 2 / (exp(2|x|) + 1); 1 from 9.1
  if ({_isnan("x")} || x == 0.0f) return x;  // (x + x z P would turn -0 into +0)
  float a = abs(x);
  if (a < 0.625f) {{ float z = x * x; return x + x * z * ({horner("z", TANH_F32)}); }}
  float r = a > 9.1f ? 1.0f : 1.0f - 2.0f / (einc_exp_f32(2.0f * a) + 1.0f);
  return x < 0.0f ? -r : r;
}}"""


def _erfcx_pieces() -> str:
    lines = []
    for k, (upper, middle, coefficients) in enumerate(ERFCX_F32):
        test = f"if (a < {f(upper)}) " if k < len(ERFCX_F32) - 1 else ""
        lines.append(f"  {test}{{ float t = a - {f(middle)}; return {horner('t', coefficients)}; }}")
    return "\n".join(lines)


_ERFCX_F32 = f"""inline float einc_erfcx_f32(float a) {{
  // erfc(a) exp(a^2) for a in [0.5, 10.25]: a fitted polynomial per piece
{_erfcx_pieces()}
}}"""

_ERFC_LARGE_F32 = """inline float einc_erfcbig_f32(float a) {
  // erfc(a) for a in [0.5, 10.25]: exp(-a^2) erfcx(a), with -a^2 = -h^2 - (a - h)(a + h),
  // h = a cut to 12 bits (h^2 exact): the exponent is exact to float32's precision
  float h = asfloat(asuint(a) & 0xfffff000u);
  return einc_expk_f32(-h * h, -(a - h) * (a + h)) * einc_erfcx_f32(a);
}"""

_ERF_F32 = f"""inline float einc_erf_f32(float x) {{
  // |x| < 0.84375: x + x P(x^2) (fitted); below 3.95: 1 - erfc(|x|); then 1
  if ({_isnan("x")}) return x;
  float a = abs(x);
  if (a < 0.84375f) {{ float z = x * x; return x + x * ({horner("z", ERF_F32)}); }}
  float r = a < 3.95f ? 1.0f - einc_erfcbig_f32(a) : 1.0f;
  return x < 0.0f ? -r : r;
}}"""

_ERFC_F32 = f"""inline float einc_erfc_f32(float x) {{
  // |x| < 0.5: 1 - erf(x); x <= -0.5: 2 - erfc(-x); else erfcbig
  if ({_isnan("x")}) return x;
  float a = abs(x);
  if (a < 0.5f) {{ float z = x * x; return 1.0f - (x + x * ({horner("z", ERF_F32)})); }}
  if (x < 0.0f) return a < 4.0f ? 2.0f - einc_erfcbig_f32(a) : 2.0f;
  return a < 10.25f ? einc_erfcbig_f32(a) : 0.0f;
}}"""


def _two_over_pi_word() -> str:
    cases = " ".join(f"case {k}: return 0x{w:08x}u;" for k, w in enumerate(TWO_OVER_PI) if w)
    return f"inline uint einc_twobypi_u32(int i) {{ switch (i) {{ {cases} default: return 0u; }} }}"


_REDUCE_F32 = f"""struct einc_reduced_f32 {{ float r; int q; }};

inline einc_reduced_f32 einc_reduce_f32(float a) {{
  // a (finite, > pi/4) = (q + r / (pi/2)) pi/2 exactly enough, |r| <= pi/4: the 24-bit
  // significand m times 96 bits of 2/pi from the bit that makes the product's bits above 2
  // multiples of 4 (Payne-Hanek), in 32-bit words and 64-bit sums
  uint u = asuint(a);
  int e = (int)(u >> 23) - 127;
  uint64_t m = (u & 0x007fffffu) | 0x00800000u;
  int p = e + 39;
  int w = p >> 5;
  uint sh = (uint)(p & 31);
  uint t0 = einc_twobypi_u32(w), t1 = einc_twobypi_u32(w + 1), t2 = einc_twobypi_u32(w + 2), t3 = einc_twobypi_u32(w + 3);
  uint w0 = sh == 0u ? t0 : (t0 << sh) | (t1 >> (32u - sh));
  uint w1 = sh == 0u ? t1 : (t1 << sh) | (t2 >> (32u - sh));
  uint w2 = sh == 0u ? t2 : (t2 << sh) | (t3 >> (32u - sh));
  uint64_t p2 = m * w2, p1 = m * w1, p0 = m * w0;
  uint64_t mid = (p2 >> 32) + (p1 & 0xffffffffu);
  uint64_t top = (mid >> 32) + (p1 >> 32) + (p0 & 0xffffffffu);
  // the product's bits 94, 95 (top's 30, 31) are q mod 4, bits 30..93 the fraction
  uint64_t fr = ((top & 0x3fffffffu) << 34) | ((mid & 0xffffffffu) << 2) | ((p2 & 0xffffffffu) >> 30);
  int q = (int)((top >> 30) & 3u);
  float sgn = 1.0f;
  if ((fr >> 63) != 0u) {{ q += 1; fr = 0u - fr; sgn = -1.0f; }}
  uint hi32 = (uint)(fr >> 32), lo32 = (uint)(fr & 0xffffffffu);
  int lz = hi32 != 0u ? 31 - (int)firstbithigh(hi32) : 63 - (int)firstbithigh(lo32);
  uint top32 = (uint)((fr << (uint)lz) >> 32);
  float h = (float)(top32 >> 16) * 65536.0f, l = (float)(top32 & 0xffffu);
  // r = (h + l) 2^(-32 - lz) pi/2, h * PIO2_HI exact
  float r = h * {f(PIO2_HI)} + (h * {f(PIO2_LO)} + l * {f(math.pi / 2)});
  einc_reduced_f32 res;
  res.r = sgn * einc_ldexp_f32(r, -32 - lz);
  res.q = q & 3;
  return res;
}}"""

_SINK_F32 = f"""inline float einc_sink_f32(float r) {{
  float z = r * r;
  if (r == 0.0f) return r;  // -0 (r + r z P would be +0)
  return r + r * z * ({horner("z", SIN_TAYLOR)});
}}"""

_COSK_F32 = f"""inline float einc_cosk_f32(float r) {{
  float z = r * r;
  return 1.0f - (0.5f * z - z * z * ({horner("z", COS_TAYLOR)}));
}}"""


def _trig(name: str, body: str) -> str:
    return f"""inline float einc_{name}_f32(float x) {{
  // |x| <= pi/4: the kernels (Taylor); else reduced by einc_reduce_f32
  uint u = asuint(x) & 0x7fffffffu;
  if (u >= 0x7f800000u) return u == 0x7f800000u ? {NAN} : x;
  float a = abs(x);
  float r = x;
  int q = 0;
  if (a > {f(math.pi / 4)}) {{ einc_reduced_f32 red = einc_reduce_f32(a); r = x < 0.0f ? -red.r : red.r; q = x < 0.0f ? (4 - red.q) & 3 : red.q; }}
{body}
}}"""


_SIN_F32 = _trig("sin", """  float v = (q & 1) == 0 ? einc_sink_f32(r) : einc_cosk_f32(r);
  return (q & 2) == 0 ? v : -v;""")
_COS_F32 = _trig("cos", """  float v = (q & 1) == 0 ? einc_cosk_f32(r) : einc_sink_f32(r);
  return ((q + 1) & 2) == 0 ? v : -v;""")
_TANK_F32 = f"""inline float einc_tank_f32(float r) {{
  // r + r^3 P(r^2) (fitted), |r| <= pi/4
  float z = r * r;
  return r + r * z * ({horner("z", TAN_F32)});
}}"""
_TAN_F32 = _trig("tan", """  float t = einc_tank_f32(r);
  return (q & 1) == 0 ? t : -1.0f / t;""")


def _log2_f64_series() -> list[float]:
    return [2 / (2 * n + 1) for n in range(1, 9)]


_POW_F32 = f"""inline float einc_pow_f32(float x, float y) {{
  // C's pow (IEEE 754's special cases); else 2^(y log2|x|) computed in float64 arithmetic
  // (log2 by the atanh series, 2^t by its Taylor series: 1e-15 relative, so the float32
  // result is rounded once from a value good to far below its ulp), negated for a negative
  // base and an odd integer y
  uint ux = asuint(x), uy = asuint(y);
  uint ax = ux & 0x7fffffffu, ay = uy & 0x7fffffffu;
  if (ay == 0u || ux == 0x3f800000u) return 1.0f;
  if (ax > 0x7f800000u || ay > 0x7f800000u) return {NAN};
  bool integer = trunc(y) == y;
  bool odd = integer && ay < 0x4b800000u && trunc(y * 0.5f) != y * 0.5f;
  bool negative = (ux >> 31) != 0u;
  if (ay == 0x7f800000u) {{
    if (ax == 0x3f800000u) return 1.0f;
    return (ax > 0x3f800000u) == ((uy >> 31) == 0u) ? {INF} : 0.0f;
  }}
  if (ax == 0u || ax == 0x7f800000u) {{
    bool big = (ax == 0u) == ((uy >> 31) != 0u);  // 0 to a negative power, inf to a positive
    float v = big ? {INF} : 0.0f;
    return negative && odd ? -v : v;
  }}
  if (negative && !integer) return {NAN};
  int e = 0;
  if (ax < 0x00800000u) {{ ax = asuint(abs(x) * 8388608.0f); e = -23; }}
  e += (int)(ax >> 23) - 127;
  uint mb = (ax & 0x007fffffu) | 0x3f800000u;
  if (mb > 0x3fb504f3u) {{ mb -= 0x00800000u; e += 1; }}
  double fm = (double)asfloat(mb) - 1.0L;
  double s = fm / (2.0L + fm);
  double z = s * s;
  double lg = 2.0L * s + s * z * ({horner("z", _log2_f64_series(), d)});
  double t = (double)y * ((double)e + lg * {d(1 / math.log(2))});
  if (t >= 128.5L) return negative && odd ? -{INF} : {INF};
  if (t <= -151.0L) return negative && odd ? -0.0f : 0.0f;
  int k = (int)t;
  if (t - (double)k > 0.5L) k += 1;
  if (t - (double)k < -0.5L) k -= 1;
  double g = t - (double)k;
  double p = 1.0L + g * ({horner("g", [math.log(2) ** n / math.factorial(n) for n in range(1, 15)], d)});
  if (k < -100) {{ p *= {d(2.0**-64)}; k += 64; }}
  if (k > 120) {{ p *= 256.0L; k -= 8; }}
  float v = (float)(p * (double)asfloat((uint)(k + 127) << 23));  // p 2^k exact, then rounded once
  return negative && odd ? -v : v;
}}"""


# ---- float64 -------------------------------------------------------------------------------------

_TRUNC_F64 = """inline double einc_trunc_f64(double x) {
  // |x| < 2^52: its integer part from two 32-bit halves (exact conversions)
  double a = abs(x);
  if (!(a < 4503599627370496.0L)) return x;
  uint hi = (uint)(a * 2.3283064365386963e-10L);
  uint lo = (uint)(a - (double)hi * 4294967296.0L);
  double t = (double)hi * 4294967296.0L + (double)lo;
  return x < 0.0L ? -t : (x > 0.0L ? t : x);
}"""

_FLOOR_F64 = """inline double einc_floor_f64(double x) {
  double t = einc_trunc_f64(x);
  return t > x ? t - 1.0L : t;
}"""

_CEIL_F64 = """inline double einc_ceil_f64(double x) {
  double t = einc_trunc_f64(x);
  return t < x ? t + 1.0L : t;
}"""

_ROUND_F64 = """inline double einc_round_f64(double x) {
  // halves away from zero: x - trunc(x) is exact
  double t = einc_trunc_f64(x);
  double r = x - t;
  if (r >= 0.5L) return t + 1.0L;
  if (r <= -0.5L) return t - 1.0L;
  return t;
}"""

_SQRT_F64 = f"""inline double einc_sqrt_f64(double x) {{
  // float32 sqrt of the float32 conversion (x scaled by an even power of 2 into its range),
  // two Newton steps, then one correction by the residual x - y^2, computed exactly from
  // y = yh + yl, yh = y cut to float32's 24 bits (yh^2 and 2 yh yl exact)
  if ({_isnan("(float)x")} || x < 0.0L) return (double){NAN};
  if (x == 0.0L || x > {d(1.7976931348623157e308)}) return x;
  double s = 1.0L, v = x;
  for (int i = 0; i < 8 && v > 1e30L; i++) {{ v *= {d(2.0**-200)}; s *= {d(2.0**100)}; }}
  for (int i = 0; i < 8 && v < 1e-30L; i++) {{ v *= {d(2.0**200)}; s *= {d(2.0**-100)}; }}
  double y = (double)sqrt((float)v);
  y = 0.5L * (y + v / y);
  y = 0.5L * (y + v / y);
  double yh = (double)(float)y;
  double yl = y - yh;
  double res = ((v - yh * yh) - 2.0L * yh * yl) - yl * yl;
  return (y + res / (2.0L * y)) * s;
}}"""

_RSQRT_F64 = """inline double einc_rsqrt_f64(double x) { return 1.0L / einc_sqrt_f64(x); }"""


# ---- float64 transcendental functions ----------------------------------------------------------

_POW2_F64 = f"""inline double einc_pow2_f64(int k) {{
  // 2^k exactly, k in [-1074, 1023]: float32 powers of 2 multiplied
  double p = 1.0L;
  for (int i = 0; i < 9 && k > 127; i++) {{ p *= {d(2.0**127)}; k -= 127; }}
  for (int i = 0; i < 9 && k < -126; i++) {{ p *= {d(2.0**-126)}; k += 126; }}
  return p * (double)asfloat((uint)(k + 127) << 23);
}}"""

_LDEXP_F64 = f"""inline double einc_ldexp_f64(double x, int k) {{
  // x * 2^k for x near 1 and k in [-1100, 1030], rounded once (a subnormal result too)
  if (k < -1022) return (x * einc_pow2_f64(k + 200)) * {d(2.0**-200)};
  if (k > 1023) {{ x *= 2.0L; k -= 1; }}
  return x * einc_pow2_f64(k);
}}"""

_ILOGB_F64 = f"""inline int einc_ilogb_f64(double a) {{
  // floor(log2 a) for a finite > 0: a scaled by 2^-+200 steps into float32's range, the
  // exponent of its float32 conversion, less one where the conversion rounded up to 2^k
  int e = 0;
  double v = a;
  for (int i = 0; i < 6 && v >= 1e30L; i++) {{ v *= {d(2.0**-200)}; e += 200; }}
  for (int i = 0; i < 6 && v < 1e-30L; i++) {{ v *= {d(2.0**200)}; e -= 200; }}
  int k = (int)((asuint((float)v) >> 23) & 255u) - 127;
  if (v < einc_pow2_f64(k)) k -= 1;
  return e + k;
}}"""

_ISNAN64 = "(asuint((float)x) & 0x7fffffffu) > 0x7f800000u"
_INF64 = f"(double){INF}"
_NAN64 = f"(double){NAN}"


def _round_to_int(v: str) -> str:
    return f"(int)({v} + ({v} >= 0.0L ? 0.5L : -0.5L))"


_EXPK_F64 = f"""inline double einc_expk_f64(double a, double b) {{
  // exp(a + b), b small: k = round(a / ln 2), r = a + b - k ln 2 (Cody-Waite), Taylor to r^14
  double t = a * {d(1 / math.log(2))};
  int k = {_round_to_int("t")};
  double r = ((a - (double)k * {d(LN2_HI64)}) - (double)k * {d(LN2_LO64)}) + b;
  double p = 1.0L + (r + r * r * ({horner("r", [1 / math.factorial(n) for n in range(2, 15)], d)}));
  return einc_ldexp_f64(p, k);
}}"""

_EXP_F64 = f"""inline double einc_exp_f64(double x) {{
  if ({_ISNAN64}) return x;
  if (x > 709.8L) return {_INF64};
  if (x < -746.0L) return 0.0L;
  return einc_expk_f64(x, 0.0L);
}}"""

_EXP2_F64 = f"""inline double einc_exp2_f64(double x) {{
  // 2^x = 2^k * 2^f, k = round(x), f = x - k exact, 2^f by its Taylor series (|f| <= 1/2)
  if ({_ISNAN64}) return x;
  if (x >= 1024.0L) return {_INF64};
  if (x <= -1076.0L) return 0.0L;
  int k = {_round_to_int("x")};
  double t = x - (double)k;
  return einc_ldexp_f64(1.0L + t * ({horner("t", [math.log(2) ** n / math.factorial(n) for n in range(1, 16)], d)}), k);
}}"""

_LOG_PROLOGUE_F64 = f"""  // x = 2^k m, m in [sqrt(1/2), sqrt(2)), f = m - 1 exact, s = f / (2 + f):
  // log(m) = f - hfsq + s (hfsq + R(s^2)), hfsq = f^2 / 2, R the atanh series
  if ({_ISNAN64}) return x;
  if (x == 0.0L) return -{_INF64};
  if (x < 0.0L) return {_NAN64};
  if (x > {d(1.7976931348623157e308)}) return x;
  int e = einc_ilogb_f64(x);
  double m = (x * einc_pow2_f64(-e / 2)) * einc_pow2_f64(-e - (-e / 2));
  if (m > {d(math.sqrt(2))}) {{ m *= 0.5L; e += 1; }}
  double f = m - 1.0L;
  double k = (double)e;
  double hfsq = 0.5L * f * f;
  double s = f / (2.0L + f);
  double z = s * s;
  double R = z * ({horner("z", [2 / (2 * n + 1) for n in range(1, 12)], d)});"""

_LOG_F64 = f"""inline double einc_log_f64(double x) {{
{_LOG_PROLOGUE_F64}
  return k * {d(LN2_HI64)} - ((hfsq - (s * (hfsq + R) + k * {d(LN2_LO64)})) - f);
}}"""

_LOG_HI_LO_F64 = """  // log(m) = hi + lo, hi cut to float32's 24 bits (no rewrite cancels lo)
  double hi = (double)(float)(f - hfsq);
  double lo = ((f - hi) - hfsq) + s * (hfsq + R);"""

_LOG2_F64 = f"""inline double einc_log2_f64(double x) {{
{_LOG_PROLOGUE_F64}
{_LOG_HI_LO_F64}
  double a = hi * {d(LOG2E_HI64)};
  double w = k + a;
  return w + ((((lo + hi) * {d(LOG2E_LO64)} + lo * {d(LOG2E_HI64)}) + ((k - w) + a)));
}}"""

_LOG10_F64 = f"""inline double einc_log10_f64(double x) {{
{_LOG_PROLOGUE_F64}
{_LOG_HI_LO_F64}
  return (((k * {d(LOG10_2_LO64)} + (lo + hi) * {d(LOG10E_LO64)}) + lo * {d(LOG10E_HI64)}) + hi * {d(LOG10E_HI64)}) + k * {d(LOG10_2_HI64)};
}}"""

_TANH_F64 = f"""inline double einc_tanh_f64(double x) {{
  // |x| < 0.625: x + x^3 P(x^2) (fitted); else 1 - 2 / (exp(2|x|) + 1); 1 from 19.5
  if ({_ISNAN64} || x == 0.0L) return x;  // (x + x z P would turn -0 into +0)
  double a = abs(x);
  if (a < 0.625L) {{ double z = x * x; return x + x * z * ({horner("z", TANH_F64, d)}); }}
  double r = a > 19.5L ? 1.0L : 1.0L - 2.0L / (einc_exp_f64(2.0L * a) + 1.0L);
  return x < 0.0L ? -r : r;
}}"""


def _erfcx64_pieces() -> str:
    lines = []
    for k, (upper, middle, coefficients) in enumerate(ERFCX_F64):
        test = f"if (a < {d(upper)}) " if k < len(ERFCX_F64) - 1 else ""
        lines.append(f"  {test}{{ double t = a - {d(middle)}; return {horner('t', coefficients, d)}; }}")
    return "\n".join(lines)


_ERFCX_F64 = f"""inline double einc_erfcx_f64(double a) {{
  // erfc(a) exp(a^2) for a in [0.5, 27.5]: a fitted polynomial per piece
{_erfcx64_pieces()}
}}"""

_ERFC_LARGE_F64 = """inline double einc_erfcbig_f64(double a) {
  // erfc(a) for a in [0.5, 27.5]: exp(-a^2) erfcx(a), -a^2 = -h^2 - (a - h)(a + h), h = a cut
  // to float32's 24 bits (h^2 exact)
  double h = (double)(float)a;
  return einc_expk_f64(-h * h, -(a - h) * (a + h)) * einc_erfcx_f64(a);
}"""

_ERF_F64 = f"""inline double einc_erf_f64(double x) {{
  // |x| < 0.5: x + x P(x^2) (fitted); below 6: 1 - erfc(|x|); then 1
  if ({_ISNAN64}) return x;
  double a = abs(x);
  if (a < 0.5L) {{ double z = x * x; return x + x * ({horner("z", ERF_F64, d)}); }}
  double r = a < 6.0L ? 1.0L - einc_erfcbig_f64(a) : 1.0L;
  return x < 0.0L ? -r : r;
}}"""

_ERFC_F64 = f"""inline double einc_erfc_f64(double x) {{
  // |x| < 0.5: 1 - erf(x); x <= -0.5: 2 - erfc(-x); else erfcbig
  if ({_ISNAN64}) return x;
  double a = abs(x);
  if (a < 0.5L) {{ double z = x * x; return 1.0L - (x + x * ({horner("z", ERF_F64, d)})); }}
  if (x < 0.0L) return a < 6.0L ? 2.0L - einc_erfcbig_f64(a) : 2.0L;
  return a < 27.5L ? einc_erfcbig_f64(a) : 0.0L;
}}"""


def _reduce_f64() -> str:
    window = "\n".join(
        f"  uint t{k} = einc_twobypi_u32(w + {k});" for k in range(7)
    )
    words = "\n".join(
        f"  uint w{k} = sh == 0u ? t{k} : (t{k} << sh) | (t{k + 1} >> (32u - sh));" for k in range(6)
    )
    accumulate = ["  uint64_t a0 = 0u, a1 = 0u, a2 = 0u, a3 = 0u, a4 = 0u, a5 = 0u, a6 = 0u, a7 = 0u;",
                  "  uint64_t pr;"]
    for k in range(6):
        for half, col in (("ml", 5 - k), ("mh", 6 - k)):
            accumulate.append(f"  pr = {half} * w{k}; a{col} += pr & 0xffffffffu; a{col + 1} += pr >> 32;")
    carries = "\n".join(f"  a{c + 1} += a{c} >> 32; a{c} &= 0xffffffffu;" for c in range(6))
    accumulated = "\n".join(accumulate)
    return f"""struct einc_reduced_f64 {{ double r; int q; }};

inline einc_reduced_f64 einc_reduce_f64(double a) {{
  // a (finite, > pi/4) = (q + r / (pi/2)) pi/2, |r| <= pi/4: the 53-bit significand times 192
  // bits of 2/pi from the bit that makes the product's bits above 2 multiples of 4
  // (Payne-Hanek) in 32-bit limbs; the fraction's top 64 bits times pi/2 (as 2^62 pi/2) in
  // integers too, rounded once to r's 53 bits: nothing here is float arithmetic a rewrite
  // could change
  int e = einc_ilogb_f64(a);
  double M = a * einc_pow2_f64(52 - e);
  uint64_t mh = (uint)(M * {d(2.0**-32)});
  uint64_t ml = (uint)(M - (double)(uint)(M * {d(2.0**-32)}) * 4294967296.0L);
  int p = e + 10;
  int w = p >> 5;
  uint sh = (uint)(p & 31);
{window}
{words}
{accumulated}
{carries}
  // the product is 2^190 (q + fraction): q mod 4 is a5's bits 30, 31, the fraction's 128
  // bits follow
  int q = (int)((a5 >> 30) & 3u);
  uint64_t fhi = ((a5 & 0x3fffffffu) << 34) | (a4 << 2) | (a3 >> 30);
  uint64_t flo = ((a3 & 0x3fffffffu) << 34) | (a2 << 2) | (a1 >> 30);
  double sgn = 1.0L;
  if ((fhi >> 63) != 0u) {{
    q += 1;
    sgn = -1.0L;
    flo = 0u - flo;
    fhi = ~fhi + (flo == 0u ? 1u : 0u);
  }}
  uint h32 = (uint)(fhi >> 32), l32 = (uint)(fhi & 0xffffffffu);
  int lz = h32 != 0u ? 31 - (int)firstbithigh(h32) : (l32 != 0u ? 63 - (int)firstbithigh(l32) : 64);
  if (lz == 64) {{
    fhi = flo; flo = 0u; lz = 0;
    h32 = (uint)(fhi >> 32); l32 = (uint)(fhi & 0xffffffffu);
    lz = h32 != 0u ? 31 - (int)firstbithigh(h32) : 63 - (int)firstbithigh(l32);
    lz += 64;
  }}
  int s = lz & 63;
  uint64_t top = s == 0 ? fhi : (fhi << (uint)s) | (flo >> (uint)(64 - s));
  // top (64 bits, its top bit set) * floor(2^62 pi/2): the 128-bit product's high 64 bits
  uint64_t th = top >> 32, tl = top & 0xffffffffu;
  uint64_t ph = {PIO2_Q62 >> 32}u, pl = {PIO2_Q62 & 0xFFFFFFFF}u;
  uint64_t hl = th * pl, lh = tl * ph;
  uint64_t mid = ((tl * pl) >> 32) + (hl & 0xffffffffu) + (lh & 0xffffffffu);
  uint64_t hi64 = th * ph + (hl >> 32) + (lh >> 32) + (mid >> 32);
  uint shift = (hi64 >> 62) != 0u ? 10u : 9u;
  uint64_t n = (hi64 >> shift) + ((hi64 >> (shift - 1u)) & 1u);
  double nd = (double)(uint)(n >> 32) * 4294967296.0L + (double)(uint)(n & 0xffffffffu);
  einc_reduced_f64 res;
  res.r = sgn * nd * einc_pow2_f64((int)shift - 62 - lz);
  res.q = q & 3;
  return res;
}}"""


_SINK_F64 = f"""inline double einc_sink_f64(double r) {{
  double z = r * r;
  if (r == 0.0L) return r;  // -0 (r + r z P would be +0)
  return r + r * z * ({horner("z", [(-1) ** n / math.factorial(2 * n + 1) for n in range(1, 10)], d)});
}}"""

_COSK_F64 = f"""inline double einc_cosk_f64(double r) {{
  double z = r * r;
  return 1.0L - (0.5L * z - z * z * ({horner("z", [(-1) ** n / math.factorial(2 * n) for n in range(2, 10)], d)}));
}}"""


def _trig64(name: str, body: str) -> str:
    return f"""inline double einc_{name}_f64(double x) {{
  // |x| <= pi/4: the kernels (Taylor); else reduced by einc_reduce_f64
  if ({_ISNAN64}) return x;
  double a = abs(x);
  if (a > {d(1.7976931348623157e308)}) return {_NAN64};
  double r = x;
  int q = 0;
  if (a > {d(math.pi / 4)}) {{ einc_reduced_f64 red = einc_reduce_f64(a); r = x < 0.0L ? -red.r : red.r; q = x < 0.0L ? (4 - red.q) & 3 : red.q; }}
{body}
}}"""


_SIN_F64 = _trig64("sin", """  double v = (q & 1) == 0 ? einc_sink_f64(r) : einc_cosk_f64(r);
  return (q & 2) == 0 ? v : -v;""")
_COS_F64 = _trig64("cos", """  double v = (q & 1) == 0 ? einc_cosk_f64(r) : einc_sink_f64(r);
  return ((q + 1) & 2) == 0 ? v : -v;""")
_TAN_F64 = _trig64("tan", """  double s = einc_sink_f64(r), c = einc_cosk_f64(r);
  return (q & 1) == 0 ? s / c : -c / s;""")


def _pow_table_f64() -> str:
    cases = " ".join(
        f"case {j}: t.invc = {d(invc)}; t.lh = {d(head)}; t.ll = {d(rest)}; break;"
        for j, (invc, head, rest) in enumerate(POW_TABLE_F64)
    )
    return f"""struct einc_powrow_f64 {{ double invc; double lh; double ll; }};

inline einc_powrow_f64 einc_powtable_f64(int j) {{
  einc_powrow_f64 t;
  t.invc = 1.0L; t.lh = 0.0L; t.ll = 0.0L;
  switch (j) {{ {cases} default: break; }}
  return t;
}}"""


_POW_F64 = f"""inline double einc_pow_f64(double x, double y) {{
  // C's pow (IEEE 754's special cases); else 2^(y log2|x|). log2|x| = e + log2(c) + log2(1 + r)
  // (c from a table, r = m / c - 1 = A + B with A, B exact) is kept as Lh + Ll, Lh cut to
  // float32's 24 bits and Ll summed from exact terms (A and B's head times log2(e)'s 16-bit
  // head...) in an order whose partial sums are exact by construction, then the small rest;
  // y Lh is computed exactly in integers as th + tl, y Ll rounded; k = round(t) and the
  // fraction ((th - k) + tl) + y Ll are exact but for that last rounding: no error-free
  // transformation that a fast-math rewrite could cancel
  if (y == 0.0L || x == 1.0L) return 1.0L;
  if ({_isnan("(float)x")} || {_isnan("(float)y")}) return {_NAN64};
  double ax = abs(x), ay = abs(y);
  bool integer = einc_trunc_f64(y) == y;
  bool odd = integer && ay < 9007199254740992.0L && einc_trunc_f64(y * 0.5L) != y * 0.5L;
  bool negative = x < 0.0L || (x == 0.0L && 1.0L / x < 0.0L);
  if (ay > {d(1.7976931348623157e308)}) {{
    if (ax == 1.0L) return 1.0L;
    return (ax > 1.0L) == (y > 0.0L) ? {_INF64} : 0.0L;
  }}
  if (ax == 0.0L || ax > {d(1.7976931348623157e308)}) {{
    double v = (ax == 0.0L) == (y < 0.0L) ? {_INF64} : 0.0L;
    return negative && odd ? -v : v;
  }}
  if (negative && !integer) return {_NAN64};
  int e = einc_ilogb_f64(ax);
  double m = (ax * einc_pow2_f64(-e / 2)) * einc_pow2_f64(-e - (-e / 2));
  if (m >= 1.5L) {{ m *= 0.5L; e += 1; }}
  double z128 = (m - 1.0L) * 128.0L;
  einc_powrow_f64 row = einc_powtable_f64((int)(z128 + (z128 >= 0.0L ? 0.5L : -0.5L)) + 32);
  double mh = (double)(float)m;
  double ml = m - mh;
  double A = mh * row.invc - 1.0L;
  double B = ml * row.invc;
  double Bh = (double)(float)B;
  double r = A + B;
  double q = r * r * ({horner("r", [(-1) ** (n + 1) / n for n in range(2, 12)], d)});
  double small = row.ll + (A * {d(LOG2E_LO16)} + (Bh * {d(LOG2E_LO16)} + ((B - Bh) * {d(1 / math.log(2))} + q * {d(1 / math.log(2))})));
  double approx = (double)e + (row.lh + (A * {d(LOG2E_HI16)} + (Bh * {d(LOG2E_HI16)} + small)));
  double t0 = y * approx;
  if (t0 > 1100.0L) return negative && odd ? -{_INF64} : {_INF64};
  if (t0 < -1100.0L) return negative && odd ? -0.0L : 0.0L;
  double Lh = (double)(float)approx;
  double Ll = (((((double)e - Lh) + row.lh) + A * {d(LOG2E_HI16)}) + Bh * {d(LOG2E_HI16)}) + small;
  double P3 = y * Ll;
  double th = t0, tl = 0.0L;
  if (abs(t0) > 1e-10L) {{
    // y Lh exactly, in integers (a float product's error would be exact too, but a rewrite
    // sees through it): Lh = LI 2^la (its float32 bits), |y| = Y 2^(ey - 52), Y < 2^53
    uint lb = asuint((float)Lh);
    uint64_t LI = (lb & 0x007fffffu) | 0x00800000u;
    int ey = einc_ilogb_f64(ay);
    double Yd = ay * einc_pow2_f64(52 - ey);
    uint yhi = (uint)(Yd * {d(2.0**-32)});
    uint64_t Yh = yhi, Yl = (uint)(Yd - (double)yhi * 4294967296.0L);
    uint64_t p0 = Yl * LI;
    uint64_t q1 = (p0 >> 32) + Yh * LI;
    int sc = (int)((lb >> 23) & 255u) - 150 + ey - 52;
    th = ((double)(uint)(q1 >> 32) * 4294967296.0L + (double)(uint)(q1 & 0xffffffffu)) * einc_pow2_f64(sc + 32);
    tl = (double)(uint)(p0 & 0xffffffffu) * einc_pow2_f64(sc);
    if (((lb >> 31) != 0u) != (y < 0.0L)) {{ th = -th; tl = -tl; }}
  }}
  double t = (th + tl) + P3;
  if (t > 1024.5L) return negative && odd ? -{_INF64} : {_INF64};
  if (t <= -1076.0L) return negative && odd ? -0.0L : 0.0L;
  int k = {_round_to_int("t")};
  double g = ((th - (double)k) + tl) + P3;
  double v = einc_ldexp_f64(1.0L + g * ({horner("g", [math.log(2) ** n / math.factorial(n) for n in range(1, 16)], d)}), k);
  return negative && odd ? -v : v;
}}"""


HELPERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ldexp_f32": (_LDEXP_F32, ()),
    "expk_f32": (_EXPK_F32, ("ldexp_f32",)),
    "exp_f32": (_EXP_F32, ("expk_f32",)),
    "exp2_f32": (_EXP2_F32, ("ldexp_f32",)),
    "log_f32": (_LOG_F32, ()),
    "log2_f32": (_LOG2_F32, ()),
    "log10_f32": (_LOG10_F32, ()),
    "tanh_f32": (_TANH_F32, ("exp_f32",)),
    "erfcx_f32": (_ERFCX_F32, ()),
    "erfcbig_f32": (_ERFC_LARGE_F32, ("expk_f32", "erfcx_f32")),
    "erf_f32": (_ERF_F32, ("erfcbig_f32",)),
    "erfc_f32": (_ERFC_F32, ("erfcbig_f32",)),
    "twobypi_u32": (_two_over_pi_word(), ()),
    "reduce_f32": (_REDUCE_F32, ("twobypi_u32", "ldexp_f32")),
    "sink_f32": (_SINK_F32, ()),
    "cosk_f32": (_COSK_F32, ()),
    "sin_f32": (_SIN_F32, ("reduce_f32", "sink_f32", "cosk_f32")),
    "cos_f32": (_COS_F32, ("reduce_f32", "sink_f32", "cosk_f32")),
    "tank_f32": (_TANK_F32, ()),
    "tan_f32": (_TAN_F32, ("reduce_f32", "tank_f32")),
    "pow_f32": (_POW_F32, ()),
    "trunc_f64": (_TRUNC_F64, ()),
    "floor_f64": (_FLOOR_F64, ("trunc_f64",)),
    "ceil_f64": (_CEIL_F64, ("trunc_f64",)),
    "round_f64": (_ROUND_F64, ("trunc_f64",)),
    "sqrt_f64": (_SQRT_F64, ()),
    "rsqrt_f64": (_RSQRT_F64, ("sqrt_f64",)),
    "pow2_f64": (_POW2_F64, ()),
    "ldexp_f64": (_LDEXP_F64, ("pow2_f64",)),
    "ilogb_f64": (_ILOGB_F64, ("pow2_f64",)),
    "expk_f64": (_EXPK_F64, ("ldexp_f64",)),
    "exp_f64": (_EXP_F64, ("expk_f64",)),
    "exp2_f64": (_EXP2_F64, ("ldexp_f64",)),
    "log_f64": (_LOG_F64, ("ilogb_f64",)),
    "log2_f64": (_LOG2_F64, ("ilogb_f64",)),
    "log10_f64": (_LOG10_F64, ("ilogb_f64",)),
    "tanh_f64": (_TANH_F64, ("exp_f64",)),
    "erfcx_f64": (_ERFCX_F64, ()),
    "erfcbig_f64": (_ERFC_LARGE_F64, ("expk_f64", "erfcx_f64")),
    "erf_f64": (_ERF_F64, ("erfcbig_f64",)),
    "erfc_f64": (_ERFC_F64, ("erfcbig_f64",)),
    "reduce_f64": (_reduce_f64(), ("twobypi_u32", "ilogb_f64")),
    "sink_f64": (_SINK_F64, ()),
    "cosk_f64": (_COSK_F64, ()),
    "sin_f64": (_SIN_F64, ("reduce_f64", "sink_f64", "cosk_f64")),
    "cos_f64": (_COS_F64, ("reduce_f64", "sink_f64", "cosk_f64")),
    "tan_f64": (_TAN_F64, ("reduce_f64", "sink_f64", "cosk_f64")),
    "powtable_f64": (_pow_table_f64(), ()),
    "pow_f64": (_POW_F64, ("powtable_f64", "trunc_f64", "ilogb_f64", "ldexp_f64")),
}
"""name: (HLSL definition of `einc_<name>`, the helpers it calls)."""

FUNCTIONS: dict[tuple[type[Operation], Attribute], str] = {
    (mathd.ExpOp, f32): "exp_f32", (mathd.Exp2Op, f32): "exp2_f32",
    (mathd.LogOp, f32): "log_f32", (mathd.Log2Op, f32): "log2_f32",
    (mathd.Log10Op, f32): "log10_f32", (mathd.TanhOp, f32): "tanh_f32",
    (mathd.ErfOp, f32): "erf_f32", (ErfcOp, f32): "erfc_f32",
    (mathd.SinOp, f32): "sin_f32", (mathd.CosOp, f32): "cos_f32", (mathd.TanOp, f32): "tan_f32",
    (mathd.PowFOp, f32): "pow_f32",
    (mathd.TruncOp, f64): "trunc_f64", (mathd.FloorOp, f64): "floor_f64",
    (mathd.CeilOp, f64): "ceil_f64", (mathd.RoundOp, f64): "round_f64",
    (mathd.SqrtOp, f64): "sqrt_f64", (mathd.RsqrtOp, f64): "rsqrt_f64",
    (mathd.ExpOp, f64): "exp_f64", (mathd.Exp2Op, f64): "exp2_f64",
    (mathd.LogOp, f64): "log_f64", (mathd.Log2Op, f64): "log2_f64",
    (mathd.Log10Op, f64): "log10_f64", (mathd.TanhOp, f64): "tanh_f64",
    (mathd.ErfOp, f64): "erf_f64", (ErfcOp, f64): "erfc_f64",
    (mathd.SinOp, f64): "sin_f64", (mathd.CosOp, f64): "cos_f64", (mathd.TanOp, f64): "tan_f64",
    (mathd.PowFOp, f64): "pow_f64",
}  # fmt: skip
"""The helper computing each math op of an element type (the others use HLSL's built-ins)."""


def definitions(name: str) -> list[tuple[str, str]]:
    """(name, definition) of helper `name` and every helper it calls, callees first."""
    found: dict[str, str] = {}

    def visit(n: str) -> None:
        text, calls = HELPERS[n]
        for callee in calls:
            visit(callee)
        found.setdefault(n, text)

    visit(name)
    return list(found.items())


def cpp_prelude() -> str:
    """C++ definitions of the HLSL built-ins the helpers use, for compiling them with g++
    (tests/test_hlsl_math.py): `-ffp-contract=off` keeps the arithmetic HLSL's."""
    return """#include <cmath>
#include <cstdint>
#include <cstring>
typedef uint32_t uint;
static uint einc_inf_bits = 0x7f800000u;
static uint einc_nan_bits = 0x7fc00000u;
static inline uint asuint(float x) { uint u; std::memcpy(&u, &x, 4); return u; }
static inline float asfloat(uint u) { float x; std::memcpy(&x, &u, 4); return x; }
static inline double asdouble(uint lo, uint hi) { uint64_t b = ((uint64_t)hi << 32) | lo; double x; std::memcpy(&x, &b, 8); return x; }
static inline int firstbithigh(uint v) { return v == 0 ? -1 : 31 - __builtin_clz(v); }
using std::abs; using std::round; using std::trunc; using std::sqrt;
#define inline static inline
"""


def cpp_source(names: list[str]) -> str:
    """The helpers `names` (and their callees) as C++ after `cpp_prelude()`: float64 literals
    lose HLSL's `L` suffix (C++'s long double)."""
    import re

    seen: dict[str, str] = {}
    for name in names:
        for helper, text in definitions(name):
            seen.setdefault(helper, text)
    body = re.sub(r"(\d)L\b", r"\1", "\n\n".join(seen.values()))
    return cpp_prelude() + "\n" + body + "\n"
