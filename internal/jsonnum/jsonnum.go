// Package jsonnum tells when JSON text may hold a number that a float64
// does not keep exactly, so that the gateway passes such text on as it was
// written instead of through go-sdk's and encoding/json's float64s: an
// integer past 2^53 (a 64-bit ID that a Python server takes or returns as
// an int) would be rounded.
package jsonnum

// Digits is the shortest run of digits that Long reports: every integer of
// 15 digits or fewer is below 2^53 and survives a float64.
const Digits = 16

// Long reports whether raw has Digits digits or more in a row, in a number
// or (harmlessly: the caller then takes the careful path for nothing) in a
// string.
func Long(raw []byte) bool {
	run := 0
	for _, c := range raw {
		if c >= '0' && c <= '9' {
			if run++; run >= Digits {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}
