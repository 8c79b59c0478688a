module goecho

go 1.19
