from scrtune.cli.main import console

console()
