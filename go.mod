module github.com/writ-authz/writ

go 1.26.0
