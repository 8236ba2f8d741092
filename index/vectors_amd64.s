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

// func dotRows4I8(rows []int8, dim int, q []int16, out *[4]int32)
//
// Sixteen values of each of four rows per iteration: PUNPCKLBW/PUNPCKHBW
// of a register with itself and an arithmetic shift by 8 widen the bytes
// to int16, PMADDWL multiplies them by q's and adds pairs into int32
// lanes; the four rows share each load of q. Integer sums are exact, so
// the result equals dotI8's.
TEXT ·dotRows4I8(SB), NOSPLIT, $0-64
	MOVQ rows_base+0(FP), SI
	MOVQ dim+24(FP), CX   // bytes per row
	MOVQ q_base+32(FP), DI
	MOVQ out+56(FP), DX
	LEAQ (SI)(CX*1), R9   // row 1
	LEAQ (R9)(CX*1), R10  // row 2
	LEAQ (R10)(CX*1), R11 // row 3
	PXOR X0, X0
	PXOR X1, X1
	PXOR X2, X2
	PXOR X3, X3
	XORQ AX, AX           // offset in the rows (1 byte a value)
	XORQ BX, BX           // offset in q (2 bytes a value)

i8loop:
	MOVOU (DI)(BX*1), X4   // q[0:8]
	MOVOU 16(DI)(BX*1), X5 // q[8:16]

	MOVOU     (SI)(AX*1), X6
	MOVO      X6, X7
	PUNPCKLBW X6, X7
	PSRAW     $8, X7
	PUNPCKHBW X6, X6
	PSRAW     $8, X6
	PMADDWL   X4, X7
	PMADDWL   X5, X6
	PADDL     X7, X0
	PADDL     X6, X0

	MOVOU     (R9)(AX*1), X6
	MOVO      X6, X7
	PUNPCKLBW X6, X7
	PSRAW     $8, X7
	PUNPCKHBW X6, X6
	PSRAW     $8, X6
	PMADDWL   X4, X7
	PMADDWL   X5, X6
	PADDL     X7, X1
	PADDL     X6, X1

	MOVOU     (R10)(AX*1), X6
	MOVO      X6, X7
	PUNPCKLBW X6, X7
	PSRAW     $8, X7
	PUNPCKHBW X6, X6
	PSRAW     $8, X6
	PMADDWL   X4, X7
	PMADDWL   X5, X6
	PADDL     X7, X2
	PADDL     X6, X2

	MOVOU     (R11)(AX*1), X6
	MOVO      X6, X7
	PUNPCKLBW X6, X7
	PSRAW     $8, X7
	PUNPCKHBW X6, X6
	PSRAW     $8, X6
	PMADDWL   X4, X7
	PMADDWL   X5, X6
	PADDL     X7, X3
	PADDL     X6, X3

	ADDQ $16, AX
	ADDQ $32, BX
	CMPQ AX, CX
	JLT  i8loop

	// Horizontal sums of the four int32 lanes.
	PSHUFD $0x4E, X0, X9
	PADDL  X9, X0
	PSHUFD $0xB1, X0, X9
	PADDL  X9, X0
	MOVSS  X0, 0(DX)

	PSHUFD $0x4E, X1, X9
	PADDL  X9, X1
	PSHUFD $0xB1, X1, X9
	PADDL  X9, X1
	MOVSS  X1, 4(DX)

	PSHUFD $0x4E, X2, X9
	PADDL  X9, X2
	PSHUFD $0xB1, X2, X9
	PADDL  X9, X2
	MOVSS  X2, 8(DX)

	PSHUFD $0x4E, X3, X9
	PADDL  X9, X3
	PSHUFD $0xB1, X3, X9
	PADDL  X9, X3
	MOVSS  X3, 12(DX)
	RET
