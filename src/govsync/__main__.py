from govsync.cli import main

main()
