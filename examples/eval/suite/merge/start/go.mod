module example.com/merge

go 1.26
