package dirs

import "os/user"

// SetCurrentUser replaces the password database's answer for the running
// user until restore is called: a test cannot become a uid the database
// does not know (an arbitrary container uid).
func SetCurrentUser(f func() (*user.User, error)) (restore func()) {
	old := currentUser
	currentUser = f
	return func() { currentUser = old }
}
