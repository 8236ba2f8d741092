//go:build !unix

package oauth

// lock is a no-op where flock is missing: refreshes are still one at a
// time within a process, not across processes.
func (s *Store) lock(string) (func(), error) {
	if err := s.ensureDir(); err != nil {
		return nil, err
	}
	return func() {}, nil
}
