from evalctl.cli import app

app()
