// Package storagetest has storage.Gates for the tests of the stores that
// write in the data folder.
package storagetest

import "github.com/toolgate/toolgate/internal/storage"

// CheckedBefore is a Gate whose Check passed just before the data folder
// vanished: Check always says yes, the rest is Writer's. It opens the race
// a store must survive (rm -rf between its check and its write) to every
// write, so a store that makes its folder without the Gate's MkdirAll
// makes the data folder again and the test sees it.
func CheckedBefore(w *storage.Writer) storage.Gate { return checkedBefore{w} }

type checkedBefore struct{ *storage.Writer }

func (checkedBefore) Check() error { return nil }
