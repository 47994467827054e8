from farmer.cli import main

main()
