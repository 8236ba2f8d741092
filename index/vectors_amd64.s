#include "textflag.h"

// func dotRows4(rows []float32, dim int, q []float32, out *[4]float32)
//
// out[r] = dot(rows[r*dim:(r+1)*dim], q) for r = 0..3, dim a positive
// multiple of 4. Lane j of row r's accumulator adds the products of
// elements j, j+4, j+8, ... in order, exactly like the running sum s_j of
// the Go dot, and the lanes are added up as ((s0+s1)+s2)+s3: the results
// are bit-identical to dot's (MULPS/ADDPS round like MULSS/ADDSS). Four
// rows share each load of q and keep four independent add chains in flight.
TEXT ·dotRows4(SB), NOSPLIT, $0-64
	MOVQ rows_base+0(FP), SI
	MOVQ dim+24(FP), CX
	MOVQ q_base+32(FP), DI
	MOVQ out+56(FP), DX
	SHLQ $2, CX           // bytes per row
	LEAQ (SI)(CX*1), R9   // row 1
	LEAQ (R9)(CX*1), R10  // row 2
	LEAQ (R10)(CX*1), R11 // row 3
	XORPS X0, X0
	XORPS X1, X1
	XORPS X2, X2
	XORPS X3, X3
	XORQ AX, AX

loop:
	MOVUPS (DI)(AX*1), X4
	MOVUPS (SI)(AX*1), X5
	MULPS  X4, X5
	ADDPS  X5, X0
	MOVUPS (R9)(AX*1), X6
	MULPS  X4, X6
	ADDPS  X6, X1
	MOVUPS (R10)(AX*1), X7
	MULPS  X4, X7
	ADDPS  X7, X2
	MOVUPS (R11)(AX*1), X8
	MULPS  X4, X8
	ADDPS  X8, X3
	ADDQ   $16, AX
	CMPQ   AX, CX
	JLT    loop

	// ((l0+l1)+l2)+l3 per accumulator.
	MOVAPS X0, X9
	SHUFPS $0x55, X9, X9
	MOVAPS X0, X10
	SHUFPS $0xAA, X10, X10
	MOVAPS X0, X11
	SHUFPS $0xFF, X11, X11
	ADDSS  X9, X0
	ADDSS  X10, X0
	ADDSS  X11, X0
	MOVSS  X0, 0(DX)

	MOVAPS X1, X9
	SHUFPS $0x55, X9, X9
	MOVAPS X1, X10
	SHUFPS $0xAA, X10, X10
	MOVAPS X1, X11
	SHUFPS $0xFF, X11, X11
	ADDSS  X9, X1
	ADDSS  X10, X1
	ADDSS  X11, X1
	MOVSS  X1, 4(DX)

	MOVAPS X2, X9
	SHUFPS $0x55, X9, X9
	MOVAPS X2, X10
	SHUFPS $0xAA, X10, X10
	MOVAPS X2, X11
	SHUFPS $0xFF, X11, X11
	ADDSS  X9, X2
	ADDSS  X10, X2
	ADDSS  X11, X2
	MOVSS  X2, 8(DX)

	MOVAPS X3, X9
	SHUFPS $0x55, X9, X9
	MOVAPS X3, X10
	SHUFPS $0xAA, X10, X10
	MOVAPS X3, X11
	SHUFPS $0xFF, X11, X11
	ADDSS  X9, X3
	ADDSS  X10, X3
	ADDSS  X11, X3
	MOVSS  X3, 12(DX)
	RET

// func dotRows4BF16(rows []uint16, dim int, q []float32, out *[4]float32)
//
// Eight values of each of four rows per iteration: PUNPCKLWL/PUNPCKHWL
// against a zero register put each 16-bit value in the high half of a
// 32-bit lane, which is its float32; the four rows share each load of q.
TEXT ·dotRows4BF16(SB), NOSPLIT, $0-64
	MOVQ rows_base+0(FP), SI
	MOVQ dim+24(FP), CX
	MOVQ q_base+32(FP), DI
	MOVQ out+56(FP), DX
	SHLQ $1, CX           // bytes per row
	LEAQ (SI)(CX*1), R9   // row 1
	LEAQ (R9)(CX*1), R10  // row 2
	LEAQ (R10)(CX*1), R11 // row 3
	XORPS X0, X0
	XORPS X1, X1
	XORPS X2, X2
	XORPS X3, X3
	XORQ AX, AX           // offset in the rows (2 bytes a value)
	XORQ BX, BX           // offset in q (4 bytes a value)

bfloop:
	MOVUPS (DI)(BX*1), X4   // q[0:4]
	MOVUPS 16(DI)(BX*1), X5 // q[4:8]

	MOVOU     (SI)(AX*1), X6
	PXOR      X7, X7
	PUNPCKLWL X6, X7
	PXOR      X8, X8
	PUNPCKHWL X6, X8
	MULPS     X4, X7
	MULPS     X5, X8
	ADDPS     X7, X0
	ADDPS     X8, X0

	MOVOU     (R9)(AX*1), X6
	PXOR      X7, X7
	PUNPCKLWL X6, X7
	PXOR      X8, X8
	PUNPCKHWL X6, X8
	MULPS     X4, X7
	MULPS     X5, X8
	ADDPS     X7, X1
	ADDPS     X8, X1

	MOVOU     (R10)(AX*1), X6
	PXOR      X7, X7
	PUNPCKLWL X6, X7
	PXOR      X8, X8
	PUNPCKHWL X6, X8
	MULPS     X4, X7
	MULPS     X5, X8
	ADDPS     X7, X2
	ADDPS     X8, X2

	MOVOU     (R11)(AX*1), X6
	PXOR      X7, X7
	PUNPCKLWL X6, X7
	PXOR      X8, X8
	PUNPCKHWL X6, X8
	MULPS     X4, X7
	MULPS     X5, X8
	ADDPS     X7, X3
	ADDPS     X8, X3

	ADDQ $16, AX
	ADDQ $32, BX
	CMPQ AX, CX
	JLT  bfloop

	// Horizontal sums: X0..X3 hold four lanes each.
	MOVAPS X0, X9
	SHUFPS $0x4E, X9, X9 // lanes 2,3,0,1
	ADDPS  X9, X0
	MOVAPS X0, X9
	SHUFPS $0xB1, X9, X9 // lanes 1,0,3,2
	ADDPS  X9, X0
	MOVSS  X0, 0(DX)

	MOVAPS X1, X9
	SHUFPS $0x4E, X9, X9
	ADDPS  X9, X1
	MOVAPS X1, X9
	SHUFPS $0xB1, X9, X9
	ADDPS  X9, X1
	MOVSS  X1, 4(DX)

	MOVAPS X2, X9
	SHUFPS $0x4E, X9, X9
	ADDPS  X9, X2
	MOVAPS X2, X9
	SHUFPS $0xB1, X9, X9
	ADDPS  X9, X2
	MOVSS  X2, 8(DX)

	MOVAPS X3, X9
	SHUFPS $0x4E, X9, X9
	ADDPS  X9, X3
	MOVAPS X3, X9
	SHUFPS $0xB1, X9, X9
	ADDPS  X9, X3
	MOVSS  X3, 12(DX)
	RET
