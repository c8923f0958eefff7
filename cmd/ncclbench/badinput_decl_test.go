package main

// Temporary: the bad-input harness declares this map; delete this file
// when the harness lands.
var badInputFixtures = map[string]func(string) error{}
