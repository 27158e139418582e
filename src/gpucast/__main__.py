from gpucast.cli.app import main

main()
