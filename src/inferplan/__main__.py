from inferplan.cli.main import main

main()
