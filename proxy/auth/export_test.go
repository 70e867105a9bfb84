package auth

// MaxFirstLines is maxFirstLines, for the tests of package auth_test.
const MaxFirstLines = maxFirstLines
