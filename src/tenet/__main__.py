from tenet.cli import main

main()
